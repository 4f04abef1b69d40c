import { randomInt } from 'node:crypto';
import type { Environment } from '@marcbachmann/cel-js';
import { toJson } from './cel-types.js';

/**
 * ngrok's utility macros (its "Macros reference"): namespaced functions such as `rand.double()`,
 * `b64.encode('x')` or `basic_auth.encode(user, password)`. CEL reads `rand.double()` as a call
 * of `double` on the variable `rand`, so each namespace is a constant of a type of its own that
 * has only these methods; no policy can give them another value.
 */

/** `rand`: random numbers for A/B splits and sampling (not for secrets: Math.random). */
class RandMacros {}
/** `b64`: Base64 of text. */
class B64Macros {}
/** `base64`: Base64 of bytes. */
class Base64Macros {}
/** `basic_auth`: the Authorization value of Basic authentication. */
class BasicAuthMacros {}
/** `json`: JSON text to and from lists and maps. */
class JsonMacros {}

/** The namespaces, by the name policies use: what `describe()` lists among the variables. */
export const MACRO_NAMESPACES = ['rand', 'b64', 'base64', 'basic_auth', 'json'] as const;

/**
 * A random integer from `min` to `max`, both included (ngrok: positive integers, min ≤ max).
 * @example randomBetween(1n, 6n) // 1n … 6n
 */
function randomBetween(min: bigint, max: bigint): bigint {
  if (min < 0n || max < min) {
    throw new Error(`rand.int(min, max) needs 0 <= min <= max, not min ${min} and max ${max}`);
  }
  if (max - min >= 2n ** 48n - 1n) throw new Error('rand.int(min, max): the range is too wide');
  return min + BigInt(randomInt(Number(max - min) + 1));
}

function decodeBase64(text: string): Buffer {
  const trimmed = text.trim();
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(trimmed) || trimmed.length % 4 === 1) {
    throw new Error('the string is not Base64');
  }
  return Buffer.from(trimmed, 'base64');
}

/** JSON text as CEL values: numbers that are integers become ints, objects become maps. */
function fromJson(value: unknown): unknown {
  if (typeof value === 'number') return Number.isInteger(value) ? BigInt(value) : value;
  if (Array.isArray(value)) return value.map(fromJson);
  if (value !== null && typeof value === 'object') {
    return new Map(Object.entries(value).map(([k, v]) => [k, fromJson(v)]));
  }
  return value;
}

/** Register the macro namespaces and their functions on `env`. */
export function registerMacros(env: Environment): void {
  env
    .registerType('RandMacros', { ctor: RandMacros, fields: {} })
    .registerType('B64Macros', { ctor: B64Macros, fields: {} })
    .registerType('Base64Macros', { ctor: Base64Macros, fields: {} })
    .registerType('BasicAuthMacros', { ctor: BasicAuthMacros, fields: {} })
    .registerType('JsonMacros', { ctor: JsonMacros, fields: {} })
    .registerConstant('rand', 'RandMacros', new RandMacros())
    .registerConstant('b64', 'B64Macros', new B64Macros())
    .registerConstant('base64', 'Base64Macros', new Base64Macros())
    .registerConstant('basic_auth', 'BasicAuthMacros', new BasicAuthMacros())
    .registerConstant('json', 'JsonMacros', new JsonMacros())
    .registerFunction('RandMacros.double(): double', () => Math.random())
    .registerFunction('RandMacros.int(): int', () => randomBetween(0n, 1n))
    .registerFunction('RandMacros.int(int, int): int', (_r: RandMacros, min: bigint, max: bigint) =>
      randomBetween(min, max),
    )
    .registerFunction('B64Macros.encode(string): string', (_b: B64Macros, s: string) =>
      Buffer.from(s, 'utf8').toString('base64'),
    )
    .registerFunction('B64Macros.decode(string): string', (_b: B64Macros, s: string) =>
      decodeBase64(s).toString('utf8'),
    )
    .registerFunction('Base64Macros.encode(bytes): string', (_b: Base64Macros, b: Uint8Array) =>
      Buffer.from(b).toString('base64'),
    )
    .registerFunction(
      'Base64Macros.decode(string): bytes',
      (_b: Base64Macros, s: string) => new Uint8Array(decodeBase64(s)),
    )
    .registerFunction(
      'BasicAuthMacros.encode(string, string): string',
      (_b: BasicAuthMacros, user: string, password: string) =>
        `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`,
    )
    .registerFunction('JsonMacros.encode(dyn): string', (_j: JsonMacros, v: unknown) =>
      JSON.stringify(toJson(v)),
    )
    .registerFunction('JsonMacros.decode(string): dyn', (_j: JsonMacros, s: string) =>
      fromJson(JSON.parse(s)),
    )
    .registerFunction('string.decodeBase64(): string', (s: string) =>
      decodeBase64(s).toString('utf8'),
    )
    .registerFunction('string.encodeBase64(): string', (s: string) =>
      Buffer.from(s, 'utf8').toString('base64'),
    )
    .registerFunction('string.decodeJson(): dyn', (s: string) => fromJson(JSON.parse(s)))
    .registerFunction('string.isJson(): bool', (s: string) => {
      try {
        JSON.parse(s);
        return true;
      } catch {
        return false;
      }
    })
    .registerFunction('string.escapeUrl(): string', (s: string) => encodeURIComponent(s))
    .registerFunction('string.unescapeUrl(): string', (s: string) => decodeURIComponent(s))
    // ngrok's `timestamp(time.now)`: a timestamp is already one.
    .registerFunction(
      'timestamp(google.protobuf.Timestamp): google.protobuf.Timestamp',
      (d: Date) => d,
    );
}
