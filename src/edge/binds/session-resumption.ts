import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Signed tokens that let a reconnecting agent resume what it had (docs/protocol.md §10):
 *
 * - the session **cookie** (AuthResp.Extra.Cookie, sent back in Auth.Extra.Cookie) proves the
 *   agent held session `ClientId`, so its new session may take over that session's tunnels;
 * - the bind **token** (BindResp.Extra.Token, sent back in Bind.Extra.Token) records what a bind
 *   was given, so a re-bind that asked for a random name or port gets the same one again.
 *
 * Both are `<base64url JSON>.<base64url HMAC-SHA256>` under a server secret kept in the database,
 * so they survive restarts and are shared by edges over one database. Both are bound to the
 * credential that obtained them: another authtoken cannot use them.
 */

/** What a session cookie says. */
export interface SessionCookie {
  /** The session (`ts_…`) the cookie was issued to. */
  sessionId: string;
  credentialId: string;
}

/** What a bind token says: the bind and what it was given. */
export interface BindGrant {
  bindId: string;
  credentialId: string;
  proto: string;
  hostname?: string | undefined;
  port?: number | undefined;
  /** The agent asked for no particular name or port: a different one may replace it. */
  random: boolean;
}

/** The settings key of the HMAC secret. */
export const RESUMPTION_SECRET_KEY = 'edge_resumption_secret';

/**
 * Issues and verifies cookies and bind tokens.
 * @example
 * const keys = await ResumptionKeys.load(repos.settings);
 * const cookie = keys.issueCookie({ sessionId, credentialId });
 * keys.verifyCookie(cookie, clientId, credentialId) // true
 */
export class ResumptionKeys {
  constructor(private readonly secret: Buffer) {}

  /** Keys from the server secret in `settings`, created on first use. */
  static async load(settings: {
    getOrCreate(key: string, make: () => string): Promise<string>;
  }): Promise<ResumptionKeys> {
    const text = await settings.getOrCreate(RESUMPTION_SECRET_KEY, () =>
      randomBytes(32).toString('base64url'),
    );
    return new ResumptionKeys(Buffer.from(text, 'base64url'));
  }

  issueCookie(cookie: SessionCookie): string {
    return this.sign({ k: 'c', s: cookie.sessionId, c: cookie.credentialId });
  }

  /**
   * Whether `cookie` was issued to session `clientId` for `credentialId`. A cookie of another
   * session, another credential, or not ours at all is simply not valid.
   */
  verifyCookie(cookie: string | undefined, clientId: string, credentialId: string): boolean {
    const body = this.open(cookie);
    return body?.k === 'c' && body.s === clientId && body.c === credentialId;
  }

  issueBindToken(grant: BindGrant): string {
    return this.sign({
      k: 'b',
      b: grant.bindId,
      c: grant.credentialId,
      p: grant.proto,
      h: grant.hostname,
      n: grant.port,
      r: grant.random,
    });
  }

  /** The grant of a bind token for this bind id and credential, or undefined. */
  verifyBindToken(
    token: string | undefined,
    bindId: string,
    credentialId: string,
  ): BindGrant | undefined {
    const body = this.open(token);
    if (body?.k !== 'b' || body.b !== bindId || body.c !== credentialId) return undefined;
    if (typeof body.p !== 'string') return undefined;
    return {
      bindId,
      credentialId,
      proto: body.p,
      hostname: typeof body.h === 'string' ? body.h : undefined,
      port: typeof body.n === 'number' ? body.n : undefined,
      random: body.r === true,
    };
  }

  private mac(payload: string): Buffer {
    return createHmac('sha256', this.secret).update(payload).digest();
  }

  private sign(body: Record<string, unknown>): string {
    const payload = Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
    return `${payload}.${this.mac(payload).toString('base64url')}`;
  }

  private open(token: string | undefined): Record<string, unknown> | undefined {
    if (typeof token !== 'string' || token.length > 4096) return undefined;
    const dot = token.indexOf('.');
    if (dot <= 0) return undefined;
    const payload = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), 'base64url');
    const expected = this.mac(payload);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    try {
      const body = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown;
      return typeof body === 'object' && body !== null
        ? (body as Record<string, unknown>)
        : undefined;
    } catch {
      return undefined;
    }
  }
}
