import { CODES, ValidationError } from '../../core/errors.js';
import { quote, shorten } from '../../core/quote.js';
import { describeValue } from '../parse.js';

export type Mapping = Record<string, unknown>;

/** A plain mapping (not null, not a list). */
export const isMapping = (v: unknown): v is Mapping =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * One step of a walk over a config value: a list or mapping copied with `each` applied to every
 * item (given the item's path suffix, `[i]` or `.key`); anything else returned as it is.
 * @example const toCel = (v: unknown): unknown => (typeof v === 'number' ? BigInt(v) : mapChildren(v, toCel));
 */
export function mapChildren(
  value: unknown,
  each: (item: unknown, suffix: string) => unknown,
): unknown {
  if (Array.isArray(value)) return value.map((v, i) => each(v, `[${i}]`));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = each(v, `.${k}`);
    return out;
  }
  return value;
}

const DURATION_UNITS: Record<string, number> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 0.001,
  µs: 0.001,
  ns: 0.000001,
};

/**
 * A Go duration (`60s`, `1m30s`, `1h`) in milliseconds, or undefined when it is not one.
 * @example parseDuration('1m30s') // 90000
 */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$/.test(text)) return undefined;
  let total = 0;
  for (const [, n, , unit] of text.matchAll(/(\d+(\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) {
    total += Number(n) * DURATION_UNITS[unit!]!;
  }
  return total;
}

/** Bounds of a duration setting: `min`/`max` in ms, spelled `range` (e.g. "60s to 24h") in errors. */
export interface DurationRange {
  min: number;
  max: number;
  range: string;
  example: string;
  required?: boolean;
}

/**
 * `, e.g. <example>` when there is an example, else nothing: the tail of a "required" failure.
 * @example eg('["x-powered-by"]') // ', e.g. ["x-powered-by"]'
 */
function eg(example: string | undefined): string {
  return example ? `, e.g. ${example}` : '';
}

/**
 * Typed access to an action's config that refuses what it cannot use, naming the key and the
 * fix: a value of the wrong shape is 2203 (cannot be parsed), a well-formed value that breaks a
 * rule is 2204 (invalid value). Every message starts with `where` (the phase, rule and action).
 * @example
 * const config = ConfigReader.open({ status_code: 403 }, ['status_code'], 'on_http_request[0].actions[0] (deny)', 'value');
 * config.integer('status_code', { min: 400, max: 599 }) // 403
 */
export class ConfigReader {
  private constructor(
    private readonly config: Mapping,
    readonly where: string,
    readonly field: string,
  ) {}

  /** Check the keys of `config` (null means none) against `keys` and open it. */
  static open(
    config: Mapping | null,
    keys: readonly string[],
    where: string,
    field: string,
  ): ConfigReader {
    const values = config ?? {};
    for (const key of Object.keys(values)) {
      if (!keys.includes(key)) {
        const takes = keys.length === 0 ? 'takes no config' : `takes ${keys.join(', ')}`;
        throw new ValidationError(
          CODES.policyActionConfig,
          field,
          `${where}: unknown config key '${key}'; this action ${takes}`,
        );
      }
    }
    return new ConfigReader(values, where, field);
  }

  /** Refuse `config.<key>` with `message` (2204 unless `code` says otherwise). */
  fail(key: string, message: string, code: string = CODES.policyActionValue): never {
    throw new ValidationError(code, this.field, `${this.where}: config.${key} ${message}`);
  }

  /** Refuse a value of the wrong shape (2203). */
  private shape(key: string, expected: string, got: unknown): never {
    return this.fail(
      key,
      `must be ${expected}, not ${describeValue(got)}`,
      CODES.policyActionConfig,
    );
  }

  /**
   * Whether `value` (at `path`) is there; when it is not (undefined or null) and `required`, a
   * failure saying it is required, followed by `needs`.
   * @example if (!this.present(key, v, range.required, `: an integer from 1 to 10`)) return undefined;
   */
  private present(
    path: string,
    value: unknown,
    required: boolean | undefined,
    needs: string,
  ): boolean {
    if (value !== undefined && value !== null) return true;
    if (required) this.fail(path, `is required${needs}`);
    return false;
  }

  has(key: string): boolean {
    return this.config[key] !== undefined && this.config[key] !== null;
  }

  /** The raw value of `key` (undefined when absent or null). */
  value(key: string): unknown {
    const v = this.config[key];
    return v === null ? undefined : v;
  }

  string(key: string, opts: { required?: boolean; example?: string } = {}): string | undefined {
    const v = this.value(key);
    if (!this.present(key, v, opts.required, eg(opts.example))) return undefined;
    if (typeof v !== 'string') return this.shape(key, 'a string', v);
    return v;
  }

  integer(
    key: string,
    range: { min: number; max: number; required?: boolean },
  ): number | undefined {
    const v = this.value(key);
    if (!this.present(key, v, range.required, `: an integer from ${range.min} to ${range.max}`)) {
      return undefined;
    }
    if (typeof v !== 'number' || !Number.isInteger(v)) return this.shape(key, 'an integer', v);
    if (v < range.min || v > range.max) {
      this.fail(key, `must be from ${range.min} to ${range.max}, not ${v}`);
    }
    return v;
  }

  boolean(key: string): boolean | undefined {
    const v = this.value(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') return this.shape(key, 'true or false', v);
    return v;
  }

  /** A Go duration at `key` (e.g. "30s") in milliseconds, within `bounds`. */
  duration(key: string, bounds: DurationRange): number | undefined {
    return this.durationAt(key, this.value(key), bounds);
  }

  /** Like duration(), for a `value` nested below the config's own keys (`path` names it). */
  durationAt(path: string, value: unknown, bounds: DurationRange): number | undefined {
    if (!this.present(path, value, bounds.required, `, e.g. ${bounds.example}`)) return undefined;
    if (typeof value !== 'string')
      return this.shape(path, `a duration like ${bounds.example}`, value);
    const ms = parseDuration(value);
    if (ms === undefined) {
      this.fail(path, `must be a duration like ${bounds.example}, not ${quote(value, '"')}`);
    }
    if (ms < bounds.min || ms > bounds.max) {
      this.fail(path, `must be from ${bounds.range}, not ${shorten(value)}`);
    }
    return ms;
  }

  /** A list of strings with `min`..`max` entries. */
  stringList(
    key: string,
    count: { min: number; max: number; required?: boolean; example?: string },
  ): string[] | undefined {
    const v = this.value(key);
    const needs = `: a list of ${count.min} to ${count.max} strings${eg(count.example)}`;
    if (!this.present(key, v, count.required, needs)) return undefined;
    if (!Array.isArray(v)) return this.shape(key, 'a list of strings', v);
    v.forEach((item: unknown, i) => {
      if (typeof item !== 'string') this.shape(`${key}[${i}]`, 'a string', item);
    });
    this.count(key, v.length, count);
    return v as string[];
  }

  /** A mapping of names to scalar values (numbers and booleans become text), `min`..`max` entries. */
  stringMap(
    key: string,
    count: { min: number; max: number; required?: boolean; example?: string },
  ): Record<string, string> | undefined {
    const v = this.value(key);
    const needs = `: a mapping of ${count.min} to ${count.max} entries${eg(count.example)}`;
    if (!this.present(key, v, count.required, needs)) return undefined;
    if (!isMapping(v)) return this.shape(key, 'a mapping of names to values', v);
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(v)) {
      if (typeof value === 'string') out[name] = value;
      else if (typeof value === 'number' || typeof value === 'boolean') out[name] = String(value);
      else this.shape(`${key}.${name}`, 'a string', value);
    }
    this.count(key, Object.keys(out).length, count);
    return out;
  }

  private count(key: string, n: number, { min, max }: { min: number; max: number }): void {
    if (n < min || n > max) {
      this.fail(key, `must have ${min === max ? min : `${min} to ${max}`} entries, not ${n}`);
    }
  }
}
