import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * How each webhook sender signs its requests, as its own documentation describes: which header
 * carries the signature, what bytes are signed, the digest and encoding, and how old a timestamped
 * request may be. verify-webhook.ts runs these; the tests sign requests the same documented way.
 */

/** A request as a provider check sees it. */
export interface WebhookRequest {
  /** The first value of a request header (any case), or undefined. */
  header(name: string): string | undefined;
  body: Buffer;
  /** The full public URL the sender called (Twilio signs it). */
  url: string;
  /** The URL as sent and with its port written out or dropped (Twilio may sign either); only Twilio asks, so it is worked out on demand. */
  urlVariants(): readonly string[];
}

/** What a check found: accepted (with a key to spot replays) or refused with the reason. */
type WebhookVerdict =
  | { ok: true; replayKey?: string | undefined; expiresAt?: number | undefined }
  | { ok: false; reason: string };

/** Settings of the generic `hmac` provider. */
export interface HmacSettings {
  header: string;
  algorithm: 'sha1' | 'sha256' | 'sha512';
  encoding: 'hex' | 'base64';
  prefix: string;
  /** With a timestamp header, `<timestamp>.<body>` is signed and old requests are refused. */
  timestampHeader?: string | undefined;
}

export interface WebhookProvider {
  readonly name: string;
  /** How far a timestamp may be from now; undefined when the provider signs no time. */
  readonly toleranceMs?: number;
  verify(req: WebhookRequest, secret: string, now: number): WebhookVerdict;
}

const hmac = (alg: string, key: string | Buffer, ...parts: (string | Buffer)[]): Buffer => {
  const h = createHmac(alg, key);
  for (const p of parts) h.update(p);
  return h.digest();
};

/** Constant-time comparison of a digest with a signature text in `encoding`. */
function sameDigest(expected: Buffer, given: string, encoding: 'hex' | 'base64'): boolean {
  const valid = encoding === 'hex' ? /^[0-9a-fA-F]+$/ : /^[A-Za-z0-9+/]+={0,2}$/;
  if (!valid.test(given)) return false;
  const bytes = Buffer.from(given, encoding);
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

/** Constant-time comparison of two texts (GitLab's token). */
function sameText(a: string, b: string): boolean {
  const x = createHash('sha256').update(a).digest();
  const y = createHash('sha256').update(b).digest();
  return timingSafeEqual(x, y) && a === b;
}

const missing = (name: string): WebhookVerdict => ({ ok: false, reason: `no ${name} header` });
const mismatch: WebhookVerdict = { ok: false, reason: 'the signature does not match' };

/** A Unix timestamp (seconds) within `toleranceMs` of now, in milliseconds, or a refusal. */
function freshSeconds(text: string | undefined, now: number, toleranceMs: number): number | string {
  if (text === undefined || !/^\d{1,12}$/.test(text.trim())) return 'no valid timestamp';
  const ms = Number(text.trim()) * 1000;
  if (Math.abs(now - ms) > toleranceMs) {
    return `the timestamp is ${Math.round(Math.abs(now - ms) / 1000)}s from now (at most ${toleranceMs / 1000}s allowed)`;
  }
  return ms;
}

const FIVE_MINUTES = 300_000;
const TEN_MINUTES = 600_000;

/** `v0=<hex HMAC-SHA256("v0:<ts>:<body>")>` with a seconds timestamp: Slack and Zoom. */
function v0Provider(
  name: string,
  signatureHeader: string,
  timestampHeader: string,
): WebhookProvider {
  return {
    name,
    toleranceMs: FIVE_MINUTES,
    verify(req, secret, now) {
      const signature = req.header(signatureHeader);
      if (signature === undefined) return missing(signatureHeader);
      const ts = req.header(timestampHeader);
      const at = freshSeconds(ts, now, FIVE_MINUTES);
      if (typeof at === 'string') return { ok: false, reason: at };
      if (!signature.startsWith('v0=')) return mismatch;
      const expected = hmac('sha256', secret, `v0:${ts!.trim()}:`, req.body);
      if (!sameDigest(expected, signature.slice(3), 'hex')) return mismatch;
      return { ok: true, replayKey: signature, expiresAt: at + FIVE_MINUTES };
    },
  };
}

/** Standard Webhooks (and Svix, its origin, with `svix-` headers): `v1,<base64>` list. */
function standardProvider(name: string, prefix: string): WebhookProvider {
  return {
    name,
    toleranceMs: FIVE_MINUTES,
    verify(req, secret, now) {
      const id = req.header(`${prefix}-id`);
      const ts = req.header(`${prefix}-timestamp`);
      const signatures = req.header(`${prefix}-signature`);
      if (id === undefined) return missing(`${prefix}-id`);
      if (signatures === undefined) return missing(`${prefix}-signature`);
      const at = freshSeconds(ts, now, FIVE_MINUTES);
      if (typeof at === 'string') return { ok: false, reason: at };
      const key = secret.startsWith('whsec_')
        ? Buffer.from(secret.slice(6), 'base64')
        : Buffer.from(secret, 'utf8');
      const expected = hmac('sha256', key, `${id}.${ts!.trim()}.`, req.body);
      for (const entry of signatures.split(' ')) {
        const [version, value] = entry.split(',', 2);
        if (version === 'v1' && value !== undefined && sameDigest(expected, value, 'base64')) {
          return { ok: true, replayKey: `${id}.${value}`, expiresAt: at + FIVE_MINUTES };
        }
      }
      return mismatch;
    },
  };
}

const gitlab: WebhookProvider = {
  name: 'gitlab',
  verify(req, secret) {
    const token = req.header('x-gitlab-token');
    if (token === undefined) return missing('x-gitlab-token');
    return sameText(token, secret)
      ? { ok: true }
      : { ok: false, reason: 'the token does not match' };
  },
};

const stripe: WebhookProvider = {
  name: 'stripe',
  toleranceMs: FIVE_MINUTES,
  verify(req, secret, now) {
    const header = req.header('stripe-signature');
    if (header === undefined) return missing('stripe-signature');
    let ts: string | undefined;
    const v1: string[] = [];
    for (const part of header.split(',')) {
      const eq = part.indexOf('=');
      const key = part.slice(0, eq).trim();
      const value = part.slice(eq + 1).trim();
      if (key === 't') ts = value;
      else if (key === 'v1') v1.push(value);
    }
    const at = freshSeconds(ts, now, FIVE_MINUTES);
    if (typeof at === 'string') return { ok: false, reason: at };
    const expected = hmac('sha256', secret, `${ts}.`, req.body);
    const match = v1.find((s) => sameDigest(expected, s, 'hex'));
    return match ? { ok: true, replayKey: match, expiresAt: at + FIVE_MINUTES } : mismatch;
  },
};

const twitch: WebhookProvider = {
  name: 'twitch',
  toleranceMs: TEN_MINUTES,
  verify(req, secret, now) {
    const id = req.header('twitch-eventsub-message-id');
    const ts = req.header('twitch-eventsub-message-timestamp');
    const signature = req.header('twitch-eventsub-message-signature');
    if (id === undefined) return missing('twitch-eventsub-message-id');
    if (signature === undefined) return missing('twitch-eventsub-message-signature');
    const at = ts === undefined ? NaN : Date.parse(ts);
    if (Number.isNaN(at)) return { ok: false, reason: 'no valid timestamp' };
    if (Math.abs(now - at) > TEN_MINUTES) {
      return { ok: false, reason: 'the timestamp is more than 10 minutes from now' };
    }
    if (!signature.startsWith('sha256=')) return mismatch;
    const expected = hmac('sha256', secret, id, ts!, req.body);
    if (!sameDigest(expected, signature.slice(7), 'hex')) return mismatch;
    // Twitch resends a message with its id; its documentation says to drop ids already seen.
    return { ok: true, replayKey: id, expiresAt: at + TEN_MINUTES };
  },
};

/**
 * Twilio: base64 HMAC-SHA1 of the URL, followed for form posts by each parameter's name and
 * value, sorted by name; a JSON post carries `bodySHA256` (hex SHA-256 of the body) in the URL
 * and only the URL is signed.
 */
const twilio: WebhookProvider = {
  name: 'twilio',
  verify(req, secret) {
    const signature = req.header('x-twilio-signature');
    if (signature === undefined) return missing('x-twilio-signature');
    const bodyHash = new URL(req.url).searchParams.get('bodySHA256');
    let suffix = '';
    if (bodyHash !== null) {
      const actual = createHash('sha256').update(req.body).digest('hex');
      if (!sameText(actual, bodyHash.toLowerCase())) {
        return { ok: false, reason: 'bodySHA256 does not match the body' };
      }
    } else if (/^application\/x-www-form-urlencoded/i.test(req.header('content-type') ?? '')) {
      const params = [...new URLSearchParams(req.body.toString('utf8'))];
      params.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      suffix = params.map(([k, v]) => k + v).join('');
    }
    for (const url of req.urlVariants()) {
      if (sameDigest(hmac('sha1', secret, url + suffix), signature.trim(), 'base64')) {
        return { ok: true };
      }
    }
    return mismatch;
  },
};

/**
 * The generic HMAC check: `<prefix><digest of the body>` (or of `<timestamp>.<body>`) in `header`.
 * @example hmacProvider({ header: 'x-signature', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' })
 */
export function hmacProvider(s: HmacSettings, name = 'hmac'): WebhookProvider {
  return {
    name,
    ...(s.timestampHeader ? { toleranceMs: FIVE_MINUTES } : {}),
    verify(req, secret, now) {
      const signature = req.header(s.header);
      if (signature === undefined) return missing(s.header);
      if (!signature.startsWith(s.prefix)) return mismatch;
      let expected: Buffer;
      let expiresAt: number | undefined;
      if (s.timestampHeader) {
        const ts = req.header(s.timestampHeader);
        const at = freshSeconds(ts, now, FIVE_MINUTES);
        if (typeof at === 'string') return { ok: false, reason: at };
        expected = hmac(s.algorithm, secret, `${ts!.trim()}.`, req.body);
        expiresAt = at + FIVE_MINUTES;
      } else {
        expected = hmac(s.algorithm, secret, req.body);
      }
      const given = signature.slice(s.prefix.length).trim();
      if (!sameDigest(expected, given, s.encoding)) return mismatch;
      return expiresAt === undefined ? { ok: true } : { ok: true, replayKey: given, expiresAt };
    },
  };
}

/**
 * The named providers, by the `provider` value of verify-webhook (and the SDKs' webhookVerification).
 * @example WEBHOOK_PROVIDERS.get('github')?.verify(req, secret, Date.now())
 */
export const WEBHOOK_PROVIDERS: ReadonlyMap<string, WebhookProvider> = new Map(
  [
    // GitHub and Shopify sign the bare body: the generic check with their header and encoding.
    hmacProvider(
      { header: 'x-hub-signature-256', algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' },
      'github',
    ),
    hmacProvider(
      { header: 'x-shopify-hmac-sha256', algorithm: 'sha256', encoding: 'base64', prefix: '' },
      'shopify',
    ),
    gitlab,
    stripe,
    twilio,
    twitch,
    v0Provider('slack', 'x-slack-signature', 'x-slack-request-timestamp'),
    v0Provider('zoom', 'x-zm-signature', 'x-zm-request-timestamp'),
    standardProvider('standard-webhooks', 'webhook'),
    standardProvider('svix', 'svix'),
  ].map((p) => [p.name, p]),
);
