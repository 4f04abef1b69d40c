import { LRUCache } from 'lru-cache';
import { quote } from '../../core/quote.js';
import { isHeaderName } from '../headers.js';
import type { ConfigReader } from './config.js';
import type { ActionSpec, CompiledAction, PhaseContext, Terminal } from './types.js';
import {
  hmacProvider,
  WEBHOOK_PROVIDERS,
  type HmacSettings,
  type WebhookProvider,
  type WebhookRequest,
} from './webhook-providers.js';

const REFUSED: Terminal = Object.freeze({
  kind: 'respond',
  status: 403,
  headers: Object.freeze({}),
  body: '',
});

/** Replay keys remembered per binding; past it, the oldest goes (lru-cache evicts it). */
const SEEN_CAP = 10_000;

/**
 * Signatures seen lately, per binding: a replay inside the freshness window is refused. Exported
 * for its tests.
 */
export class SeenSignatures {
  /** The binding's clock as of the last add(), which is the cache's clock too. */
  private now = 0;
  private readonly until = new LRUCache<string, true>({
    max: SEEN_CAP,
    // lru-cache takes a start time of 0 for "no ttl": one added at the binding's time 0 (a test's
    // clock) would never expire. Its clock runs 1 ms ahead of the binding's, so none is 0.
    perf: { now: () => this.now + 1 },
    // Read the clock on every check: it is the binding's (tests set it), not a timer's.
    ttlResolution: 0,
  });

  /** False when `key` was seen and has not expired; else remembers it until `expiresAt`. */
  add(key: string, expiresAt: number, now: number): boolean {
    this.now = now;
    if (this.until.has(key)) return false;
    // A ttl of 0 would mean forever; a key live until `now` is kept for the millisecond.
    this.until.set(key, true, { ttl: Math.max(1, expiresAt - now) });
    return true;
  }
}

/** The URL as sent, and with the port written out or dropped (Twilio may have signed either). */
function urlVariants(raw: string): string[] {
  const out = [raw];
  try {
    const u = new URL(raw);
    const base = u.protocol === 'https:' ? '443' : '80';
    if (u.port !== '') {
      const bare = new URL(raw);
      bare.port = '';
      out.push(bare.toString());
    } else {
      out.push(raw.replace(`${u.protocol}//${u.host}`, `${u.protocol}//${u.hostname}:${base}`));
    }
  } catch {
    // Not a URL the WHATWG parser takes: only the raw text can match.
  }
  return out;
}

function readHmac(config: ConfigReader): HmacSettings {
  const header = config.string('header', { required: true, example: '"x-signature"' })!;
  if (!isHeaderName(header)) {
    config.fail('header', `must be a header name, not ${quote(header, '"')}`);
  }
  const algorithm = config.string('algorithm') ?? 'sha256';
  if (algorithm !== 'sha1' && algorithm !== 'sha256' && algorithm !== 'sha512') {
    config.fail('algorithm', `must be sha1, sha256 or sha512, not ${quote(algorithm, '"')}`);
  }
  const encoding = config.string('encoding') ?? 'hex';
  if (encoding !== 'hex' && encoding !== 'base64') {
    config.fail('encoding', `must be hex or base64, not ${quote(encoding, '"')}`);
  }
  return {
    header: header.toLowerCase(),
    algorithm,
    encoding,
    prefix: config.string('prefix') ?? '',
    timestampHeader: config.string('timestamp_header')?.toLowerCase(),
  };
}

const HMAC_KEYS = ['header', 'algorithm', 'encoding', 'prefix', 'timestamp_header'];

async function check(
  c: PhaseContext,
  provider: WebhookProvider,
  secret: string,
  seen: () => SeenSignatures,
): Promise<string | undefined> {
  let body: Buffer;
  try {
    body = await c.requestBody();
  } catch (err) {
    return `the body could not be read: ${(err as Error).message}`;
  }
  const req = c.activation.req!;
  const raw = req.url.raw;
  const request: WebhookRequest = {
    header: (name) => req.header(name)[0],
    body,
    url: raw,
    urlVariants: () => urlVariants(raw),
  };
  const now = c.now();
  const verdict = provider.verify(request, secret, now);
  if (!verdict.ok) return verdict.reason;
  if (verdict.replayKey !== undefined && verdict.expiresAt !== undefined) {
    if (!seen().add(verdict.replayKey, verdict.expiresAt, now)) {
      return 'this signed request was already received (a replay)';
    }
  }
  return undefined;
}

/**
 * `verify-webhook`: checks the request's signature the way `provider` signs its webhooks (see
 * webhook-providers.ts and the table in docs/traffic-policy.md), including the provider's replay
 * window; refused requests get 403 and a `webhook-refused` event. The body is read whole (the
 * signature covers it) and then sent upstream unchanged. `enforce: false` only records
 * `would-refuse-webhook`. Provider `hmac` takes `header`, `algorithm`, `encoding`, `prefix` and
 * `timestamp_header`.
 * @example { type: 'verify-webhook', config: { provider: 'github', secret: 'It’s a Secret to Everybody' } }
 */
export const verifyWebhookAction: ActionSpec = {
  type: 'verify-webhook',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['provider', 'secret', 'enforce', ...HMAC_KEYS],
  compile(config) {
    const name = (config.string('provider', { required: true, example: '"github"' }) ?? '')
      .trim()
      .toLowerCase()
      .replaceAll('_', '-');
    const known = [...WEBHOOK_PROVIDERS.keys(), 'hmac'].sort();
    const alias = name === 'standardwebhooks' || name === 'standard' ? 'standard-webhooks' : name;
    const found = alias === 'hmac' ? hmacProvider(readHmac(config)) : WEBHOOK_PROVIDERS.get(alias);
    if (!found) {
      return config.fail('provider', `must be one of ${known.join(', ')}, not ${quote(name, '"')}`);
    }
    if (alias !== 'hmac') {
      const stray = HMAC_KEYS.find((k) => config.has(k));
      if (stray) config.fail(stray, 'is only taken by provider "hmac"');
    }
    const secret = config.string('secret', { required: true, example: '"<signing secret>"' })!;
    if (secret === '') config.fail('secret', 'must not be empty');
    const enforce = config.boolean('enforce') ?? true;
    const action: CompiledAction = {
      alwaysTerminates: false,
      run(c) {
        const seen = (): SeenSignatures => c.state(action, () => new SeenSignatures());
        return check(c, found, secret, seen).then((problem) => {
          c.setActionResult('verify_webhook', { verified: problem === undefined });
          if (problem === undefined) return undefined;
          const message = `${found.name} webhook refused: ${problem}`;
          if (!enforce) {
            c.event('would-refuse-webhook', `${message} (enforce is false: let through)`);
            return undefined;
          }
          c.event('webhook-refused', message);
          return REFUSED;
        });
      },
    };
    return action;
  },
};
