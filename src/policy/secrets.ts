/**
 * `secrets.get('vault', 'name')`: values from the vaults the API manages (`/vaults`, `/secrets`),
 * read by policies in `${}` templates and expressions. Policies run synchronously per request, so
 * lookups go to an in-memory snapshot (a {@link SecretsResolver}) that the edge loads from the
 * store at start and reloads when a vault or secret changes, and on a timer.
 *
 * Who may read what is decided when a policy is compiled and bound, not when it runs: every call
 * names its vault and secret with literals ({@link scanSecretUses}), so a compiled policy knows
 * each vault it reads ({@link SecretRead}) and a bind checks them against the authtoken's grant
 * ({@link ungrantedSecretRead}). And a value is never computed on: a call may only be placed whole
 * into text the policy sends (a header value, a response body) or be one side of `==` / `!=`, so
 * nothing derived from a secret (its size, a prefix match) can reach events, logs or later rules.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { coalesced } from '../core/coalesced.js';
import type { ASTNode } from '@marcbachmann/cel-js';

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
 * What `secrets.get` gives CEL: a value of its own type (`Secret`), not a string, so that no
 * string function (size, matches, startsWith, +, conversions) accepts it: the type checker
 * refuses computing on it. Only `==` / `!=` ({@link secretEquals}) and a `${}` of text the policy
 * sends ({@link SecretText.reveal}) read the value. Anything else that turns it into text or JSON
 * (events, logs, bucket keys) gets `[secret]`.
 */
export class SecretText {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
  }

  /** The value, for the one place that sends it: an outbound template. */
  reveal(): string {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/**
 * CEL's `==` on a secret: in constant time (SHA-256 of both sides, compared with
 * timingSafeEqual), so an API-key check does not tell a client how much of its guess was right.
 * @example secretEquals(new SecretText('k'), 'k') // true
 */
export function secretEquals(secret: SecretText, other: unknown): boolean {
  const text =
    other instanceof SecretText ? other.reveal() : typeof other === 'string' ? other : undefined;
  if (text === undefined) return false;
  return timingSafeEqual(digest(secret.reveal()), digest(text));
}

/**
 * The `secrets` variable of CEL: the lookup of the runner evaluating, and whether any value was
 * read, so the runner knows to redact its events.
 */
export class SecretsVars {
  /** True once a value was read through this object. */
  used = false;

  constructor(readonly lookup: SecretsLookup) {}

  get(vault: string, name: string): SecretText {
    const value = this.lookup.get(vault, name);
    if (value === undefined) {
      throw new Error(
        `no secret ${JSON.stringify(name)} in vault ${JSON.stringify(vault)}; create it with POST /secrets (vaults with POST /vaults)`,
      );
    }
    this.used = true;
    return new SecretText(value);
  }
}

/** A `secrets.get` call's vault and secret names, as written (always literals). */
export interface SecretRef {
  readonly vault: string;
  readonly name: string;
}

/** Where a compiled policy reads a secret: the call and the rule, action and key that hold it. */
export interface SecretRead extends SecretRef {
  /** `phase on_http_request, rule 0 ("name"), action 1 (custom-response), config.body` */
  readonly where: string;
}

/**
 * The secrets an expression reads. `bare`: the whole expression is one `secrets.get` call, so its
 * value is the secret itself (allowed only where the text is sent whole; the compiler decides).
 */
export type SecretScan = { refs: SecretRef[]; bare: boolean } | { problem: string };

/** Operators whose result tells only whether a whole secret equals something. */
const COMPARISONS = new Set(['==', '!=']);

/** How a policy writes a secret, for messages. */
export function secretCall(ref: SecretRef): string {
  return `secrets.get(${JSON.stringify(ref.vault)}, ${JSON.stringify(ref.name)})`;
}

function isNode(value: unknown): value is ASTNode {
  return typeof value === 'object' && value !== null && 'op' in value && 'args' in value;
}

function literalText(node: unknown): string | undefined {
  return isNode(node) && node.op === 'value' && typeof node.args === 'string'
    ? node.args
    : undefined;
}

/**
 * Find every use of `secrets` in a parsed expression and check each is
 * `secrets.get('<vault>', '<secret>')` with two string literals, standing either as the whole
 * expression or as one side of `==` / `!=`. Anything else (a computed name, `size(…)`,
 * `.matches(…)`, `+`, `in`, a macro over it) is a problem: its result would carry part of a value
 * where events and logs can see it, or name a vault the bind cannot check.
 * @example scanSecretUses(env.parse("req.headers['k'][0] == secrets.get('keys', 'partner')").ast)
 *   // { refs: [{ vault: 'keys', name: 'partner' }], bare: false }
 */
export function scanSecretUses(root: ASTNode): SecretScan {
  const refs: SecretRef[] = [];
  const placed = new Set<ASTNode>();
  let problem: string | undefined;
  const visit = (node: unknown, parent: ASTNode | undefined): void => {
    if (problem !== undefined) return;
    if (Array.isArray(node)) {
      for (const child of node as unknown[]) visit(child, parent);
      return;
    }
    if (!isNode(node)) return;
    const args = node.args as unknown;
    if (node.op === 'rcall' && Array.isArray(args) && args[0] === 'get') {
      const receiver = args[1] as unknown;
      if (isNode(receiver) && receiver.op === 'id' && receiver.args === 'secrets') {
        const params = Array.isArray(args[2]) ? (args[2] as unknown[]) : [];
        const vault = literalText(params[0]);
        const name = literalText(params[1]);
        if (params.length !== 2 || vault === undefined || name === undefined) {
          problem = `secrets.get at column ${node.start + 1} must name its vault and secret with two string literals, e.g. secrets.get('vault', 'secret'), so that who may read them is known when the policy is saved`;
          return;
        }
        const ref = { vault, name };
        if (parent !== undefined && !COMPARISONS.has(parent.op)) {
          problem = `${secretCall(ref)} at column ${node.start + 1} may only be used whole: as the whole of a \${} in a header value or body the policy sends, or as one side of == or !=; computing on it (${parent.op === 'rcall' || parent.op === 'call' ? `${String((parent.args as unknown[])[0])}()` : parent.op}) could carry part of the value into events and logs`;
          return;
        }
        refs.push(ref);
        placed.add(receiver);
      }
    }
    if (node.op === 'id' && args === 'secrets' && !placed.has(node)) {
      problem = `secrets at column ${node.start + 1} may only be used as secrets.get('vault', 'secret')`;
      return;
    }
    visit(args, node);
  };
  visit(root, undefined);
  if (problem !== undefined) return { problem };
  // A call at the root passed the checks above, so it is a placed secrets.get.
  const receiver = root.op === 'rcall' ? (root.args as unknown[])[1] : undefined;
  return { refs, bare: isNode(receiver) && placed.has(receiver) };
}

/**
 * The first read in `reads` of a vault `mayRead` refuses, or undefined when all are allowed.
 * @example ungrantedSecretRead(policy.secretReads, (vault) => aclReadsVault(binder.acl, vault))
 */
export function ungrantedSecretRead(
  reads: readonly SecretRead[],
  mayRead: (vault: string) => boolean,
): SecretRead | undefined {
  return reads.find((read) => !mayRead(read.vault));
}

/**
 * Why a policy may not read `read`, for the bind refusal and `POST /traffic_policy/validate`.
 * @example notGrantedMessage('TrafficPolicy', read, 'cr_…') // 'TrafficPolicy: phase …, config.body reads secrets.get("prod", "oidc"), but …'
 */
export function notGrantedMessage(field: string, read: SecretRead, credentialId: string): string {
  return `${field}: ${read.where} reads ${secretCall(read)}, but the authtoken (credential ${credentialId}) is not granted vault ${JSON.stringify(read.vault)}. Add the ACL rule 'secrets:read:${read.vault}' to the credential (PATCH /credentials/${credentialId}), or remove the secret from the policy.`;
}
