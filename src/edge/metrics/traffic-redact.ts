/**
 * Redaction of visitors' credentials in the traffic inspector: the values of `Authorization`,
 * `Proxy-Authorization`, `Cookie`, `Set-Cookie` and the header names the operator adds
 * (`--inspect-redact-header`) are replaced when a request is recorded, so they are never kept in
 * clear, unless the endpoint's host shows credentials (docs/security.md). What replaces them
 * keeps a hint for debugging: the authorization scheme, cookie names and attributes, lengths.
 */

/** Redacted on every endpoint that does not show credentials, whatever the operator adds. */
export const CREDENTIAL_HEADERS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
];

/** Header names as RFC 9110 allows them (token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Authorization schemes shown in front of a redacted value. Only registered and widespread ones:
 * the first word of an unknown value may be the credential itself (`Authorization: s3cr3t`).
 */
const KNOWN_SCHEMES: ReadonlySet<string> = new Set([
  'basic',
  'bearer',
  'digest',
  'dpop',
  'hoba',
  'mutual',
  'negotiate',
  'ntlm',
  'oauth',
  'privatetoken',
  'scram-sha-1',
  'scram-sha-256',
  'vapid',
  'aws4-hmac-sha256',
  'token',
  'apikey',
  'signature',
  'hawk',
]);

/** Set-Cookie attributes (RFC 6265bis) whose values are shown; any other's value is redacted. */
const COOKIE_ATTRIBUTES: ReadonlySet<string> = new Set([
  'expires',
  'max-age',
  'domain',
  'path',
  'secure',
  'httponly',
  'samesite',
  'partitioned',
  'priority',
]);

/**
 * What a redacted value of `length` characters reads as.
 * @example hidden(6) // '[redacted, 6 chars]'
 */
export function hidden(length: number): string {
  return `[redacted, ${length} ${length === 1 ? 'char' : 'chars'}]`;
}

/** `name=value` with the value hidden, or the whole pair hidden when it has no usable name. */
function hiddenPair(pair: string): string {
  const eq = pair.indexOf('=');
  const name = eq < 0 ? '' : pair.slice(0, eq).trim();
  if (!TOKEN.test(name)) return hidden(pair.trim().length);
  return `${name}=${hidden(pair.length - eq - 1)}`;
}

/**
 * `value` of the credential header `name` (lower case) as the inspector keeps it.
 * @example redactValue('authorization', 'Bearer abc') // 'Bearer [redacted, 3 chars]'
 * @example redactValue('cookie', 'sid=abc; theme=dark') // 'sid=[redacted, 3 chars]; theme=[redacted, 4 chars]'
 */
export function redactValue(name: string, value: string): string {
  switch (name) {
    case 'authorization':
    case 'proxy-authorization': {
      const m = /^(\S+)[ \t]+(.*)$/s.exec(value);
      if (m && KNOWN_SCHEMES.has(m[1]!.toLowerCase())) return `${m[1]} ${hidden(m[2]!.length)}`;
      return hidden(value.length);
    }
    case 'cookie':
      return value.split(';').map(hiddenPair).join('; ');
    case 'set-cookie': {
      const [pair = '', ...attributes] = value.split(';');
      const shown = attributes.map((attribute) => {
        const eq = attribute.indexOf('=');
        const key = (eq < 0 ? attribute : attribute.slice(0, eq)).trim();
        return COOKIE_ATTRIBUTES.has(key.toLowerCase()) ? attribute.trim() : hiddenPair(attribute);
      });
      return [hiddenPair(pair), ...shown].join('; ');
    }
    default:
      return hidden(value.length);
  }
}

/**
 * Replaces the values of credential headers. One per traffic log, with the operator's names.
 * @example new CredentialRedactor(['x-api-key']).rawHeaders(['X-Api-Key', 'k1']) // ['X-Api-Key', '[redacted, 2 chars]']
 */
export class CredentialRedactor {
  /** Lower-case names redacted: the four credential headers and the operator's. */
  readonly names: ReadonlySet<string>;
  /** Their lengths: most headers are passed over on a length compare, without lower-casing. */
  private readonly lengths: ReadonlySet<number>;

  constructor(extraNames: readonly string[] = []) {
    this.names = new Set([...CREDENTIAL_HEADERS, ...extraNames.map((n) => n.toLowerCase())]);
    this.lengths = new Set([...this.names].map((n) => n.length));
  }

  /** Whether `name` (any case) is redacted. */
  redacts(name: string): boolean {
    return this.lengths.has(name.length) && this.names.has(name.toLowerCase());
  }

  /**
   * Names and values alternating (Node's `rawHeaders`), redacted; `raw` itself when it holds no
   * credential, which is most requests, so they cost no copy.
   */
  rawHeaders(raw: readonly string[]): readonly string[] {
    let out: string[] | undefined;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!;
      if (!this.redacts(name)) continue;
      out ??= [...raw];
      out[i + 1] = redactValue(name.toLowerCase(), raw[i + 1]!);
    }
    return out ?? raw;
  }
}
