/**
 * `secrets.get('vault', 'name')`: values from the vaults the API manages (`/vaults`, `/secrets`),
 * read by policies in `${}` templates and expressions. Policies run synchronously per request, so
 * lookups go to an in-memory snapshot (a {@link SecretsResolver}) that the edge loads from the
 * store at start and reloads when a vault or secret changes, and on a timer.
 */
import { coalesced } from '../core/coalesced.js';

/** One secret in clear, as the resolver loads it. */
export interface SecretValue {
  vault: string;
  name: string;
  value: string;
}

/** What a running policy reads secrets from. */
export interface SecretsLookup {
  /** The value of secret `name` in vault `vault`, or undefined when there is none. */
  get(vault: string, name: string): string | undefined;
  /** `text` with every value this lookup holds replaced by `[secret]` (for events and logs). */
  redact(text: string): string;
}

/** What `[secret]` stands in for in events. */
export const REDACTED = '[secret]';

/** A lookup with no secrets: policies bound without a resolver (tests, validation). */
export const NO_SECRETS: SecretsLookup = {
  get: () => undefined,
  redact: (text) => text,
};

/**
 * The edge's snapshot of every secret. `reload()` replaces it whole (a failed load keeps the
 * previous one); `get` and `redact` never wait.
 * @example
 * const secrets = new SecretsResolver(() => repos.secrets.entries());
 * await secrets.reload();
 * compilePolicy(text, { protocol: 'http' }).bind({ ownerId, secrets });
 */
export class SecretsResolver implements SecretsLookup {
  private byVault = new Map<string, Map<string, string>>();
  /** Distinct non-empty values, longest first, so a value inside another is not half-redacted. */
  private values: string[] = [];

  constructor(private readonly load: () => Promise<readonly SecretValue[]>) {}

  get(vault: string, name: string): string | undefined {
    return this.byVault.get(vault)?.get(name);
  }

  redact(text: string): string {
    let out = text;
    for (const value of this.values) if (out.includes(value)) out = out.replaceAll(value, REDACTED);
    return out;
  }

  /** How many secrets the snapshot holds. */
  get size(): number {
    let n = 0;
    for (const secrets of this.byVault.values()) n += secrets.size;
    return n;
  }

  /**
   * Load the snapshot again. Calls while a load runs share it and cause one more load after it,
   * so a change announced mid-load is not missed.
   */
  readonly reload: () => Promise<void> = coalesced(async () => this.replace(await this.load()));

  private replace(entries: readonly SecretValue[]): void {
    const byVault = new Map<string, Map<string, string>>();
    const values = new Set<string>();
    for (const { vault, name, value } of entries) {
      let secrets = byVault.get(vault);
      if (!secrets) byVault.set(vault, (secrets = new Map<string, string>()));
      secrets.set(name, value);
      if (value !== '') values.add(value);
    }
    this.byVault = byVault;
    this.values = [...values].sort((a, b) => b.length - a.length);
  }
}

/**
 * The `secrets` variable of CEL: the lookup of the runner evaluating, and whether any value was
 * read, so the runner knows to redact its events.
 */
export class SecretsVars {
  /** True once a value was read through this object. */
  used = false;

  constructor(readonly lookup: SecretsLookup) {}

  get(vault: string, name: string): string {
    const value = this.lookup.get(vault, name);
    if (value === undefined) {
      throw new Error(
        `no secret ${JSON.stringify(name)} in vault ${JSON.stringify(vault)}; create it with POST /secrets (vaults with POST /vaults)`,
      );
    }
    this.used = true;
    return value;
  }
}
