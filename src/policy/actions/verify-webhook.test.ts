import { createHash, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { bindPolicy, oneRule } from '../../../test/support/policy-fixtures.js';
import type { RequestInput } from '../variables.js';
import { SeenSignatures } from './verify-webhook.js';

/**
 * Every provider's signature made the way its own documentation says to make it, with
 * node:crypto: accepted when right, refused (403) when the body is tampered with, the signature
 * is missing, the timestamp is stale, or the same signed request comes twice.
 */

const NOW = Date.UTC(2025, 0, 15, 12, 0, 0);
const SECONDS = Math.floor(NOW / 1000);
const BODY = Buffer.from('{"event":"push","id":42}');
const URL_BASE = 'https://hooks.burrow.test:8443/webhook?x=1';

const hex = (alg: string, key: string | Buffer, data: string | Buffer): string =>
  createHmac(alg, key).update(data).digest('hex');
const b64 = (alg: string, key: string | Buffer, data: string | Buffer): string =>
  createHmac(alg, key).update(data).digest('base64');

function runner(config: Record<string, unknown>, now = () => NOW) {
  return bindPolicy(oneRule('on_http_request', [{ type: 'verify-webhook', config }]), 'https', {
    now,
  });
}

async function send(
  r: ReturnType<typeof runner>,
  headers: Record<string, string>,
  body: Buffer = BODY,
  url = '/webhook?x=1',
): Promise<number> {
  const req: RequestInput = {
    method: 'POST',
    url,
    scheme: 'https',
    headers: { host: 'hooks.burrow.test:8443', ...headers },
    body: () => Promise.resolve(body),
  };
  const d = await r.runner.onHttpRequest({ conn: { client_ip: '192.0.2.9' }, req });
  return d.kind === 'respond' ? d.status : d.kind === 'continue' ? 200 : 0;
}

const tampered = Buffer.from('{"event":"push","id":43}');

/** Per provider: its secret and how it signs `body` at time `t` (seconds). */
const PROVIDERS: Record<
  string,
  {
    secret: string;
    sign: (body: Buffer, t: number) => Record<string, string>;
    replay?: boolean;
    window?: number;
  }
> = {
  // docs.github.com "Validating webhook deliveries": HMAC-SHA256 hex of the body, "sha256=" prefix.
  github: {
    secret: "It's a Secret to Everybody",
    sign: (body) => ({
      'x-hub-signature-256': `sha256=${hex('sha256', "It's a Secret to Everybody", body)}`,
    }),
  },
  // docs.stripe.com "Verify signatures manually": t=<ts>,v1=<hex HMAC-SHA256 of "<ts>.<body>">.
  stripe: {
    secret: 'whsec_test_secret',
    sign: (body, t) => ({
      'stripe-signature': `t=${t},v1=${hex('sha256', 'whsec_test_secret', `${t}.${body.toString()}`)},v0=deadbeef`,
    }),
    replay: true,
    window: 300,
  },
  // api.slack.com "Verifying requests from Slack": v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">.
  slack: {
    secret: '8f742231b10e8888abcd99yyyzzz85a5',
    sign: (body, t) => ({
      'x-slack-request-timestamp': String(t),
      'x-slack-signature': `v0=${hex('sha256', '8f742231b10e8888abcd99yyyzzz85a5', `v0:${t}:${body.toString()}`)}`,
    }),
    replay: true,
    window: 300,
  },
  // Twilio "Webhooks security": base64 HMAC-SHA1 of the full URL (JSON bodies: bodySHA256 in it).
  twilio: {
    secret: '12345',
    sign: () => ({
      'x-twilio-signature': b64('sha1', '12345', twilioUrl()),
    }),
  },
  // shopify.dev "Verify webhooks": base64 HMAC-SHA256 of the raw body.
  shopify: {
    secret: 'shpss_secret',
    sign: (body) => ({ 'x-shopify-hmac-sha256': b64('sha256', 'shpss_secret', body) }),
  },
  // docs.gitlab.com webhooks: the secret token is sent as is in X-Gitlab-Token.
  gitlab: { secret: 'gl-token-123', sign: () => ({ 'x-gitlab-token': 'gl-token-123' }) },
  // standardwebhooks.com spec: v1,<base64 HMAC-SHA256 of "<id>.<ts>.<body>"> keyed by base64 of whsec_.
  'standard-webhooks': {
    secret: `whsec_${Buffer.from('standard-key-0123456789').toString('base64')}`,
    sign: (body, t) => ({
      'webhook-id': 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
      'webhook-timestamp': String(t),
      'webhook-signature': `v1,${b64('sha256', Buffer.from('standard-key-0123456789'), `msg_2KWPBgLlAfxdpx2AI54pPJ85f4W.${t}.${body.toString()}`)}`,
    }),
    replay: true,
    window: 300,
  },
  // docs.svix.com "Verifying manually": the same, with svix- headers.
  svix: {
    secret: `whsec_${Buffer.from('svix-key-abcdef').toString('base64')}`,
    sign: (body, t) => ({
      'svix-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'svix-timestamp': String(t),
      'svix-signature': `v1,bm90LXRoaXM= v1,${b64('sha256', Buffer.from('svix-key-abcdef'), `msg_p5jXN8AQM9LWM0D4loKWxJek.${t}.${body.toString()}`)}`,
    }),
    replay: true,
    window: 300,
  },
  // dev.twitch.tv EventSub "Verifying the event message": sha256=<hex HMAC of id + timestamp + body>.
  twitch: {
    secret: 'twitch-secret-1234',
    sign: (body, t) => {
      const ts = new Date(t * 1000).toISOString().replace('Z', '123456Z');
      return {
        'twitch-eventsub-message-id': 'e76c6bd4-55c9-4987-8304-da1588d8988b',
        'twitch-eventsub-message-timestamp': ts,
        'twitch-eventsub-message-signature': `sha256=${hex('sha256', 'twitch-secret-1234', Buffer.concat([Buffer.from('e76c6bd4-55c9-4987-8304-da1588d8988b' + ts), body]))}`,
      };
    },
    replay: true,
    window: 600,
  },
  // developers.zoom.us "Verify webhook events": v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">.
  zoom: {
    secret: 'zoom-secret-token',
    sign: (body, t) => ({
      'x-zm-request-timestamp': String(t),
      'x-zm-signature': `v0=${hex('sha256', 'zoom-secret-token', `v0:${t}:${body.toString()}`)}`,
    }),
    replay: true,
    window: 300,
  },
};

/** Twilio signs the URL it called; for a JSON body the URL carries the body's SHA-256. */
function twilioUrl(): string {
  return `${URL_BASE}&bodySHA256=${createHash('sha256').update(BODY).digest('hex')}`;
}

describe('verify-webhook', () => {
  for (const [provider, p] of Object.entries(PROVIDERS)) {
    it(`${provider}: accepts its own signature and refuses a tampered body or none`, async () => {
      const r = runner({ provider, secret: p.secret });
      const url =
        provider === 'twilio' ? twilioUrl().slice(twilioUrl().indexOf('/webhook')) : undefined;
      expect(await send(r, p.sign(BODY, SECONDS), BODY, url)).toBe(200);
      const other = provider === 'gitlab' ? { 'x-gitlab-token': 'wrong' } : p.sign(BODY, SECONDS);
      const forged = provider === 'gitlab' ? BODY : tampered;
      expect(await send(runner({ provider, secret: p.secret }), other, forged, url)).toBe(403);
      expect(await send(runner({ provider, secret: p.secret }), {}, BODY, url)).toBe(403);
      const events = r.events.eventsFor(r.owner);
      expect(events.some((e) => e.outcome === 'webhook-refused')).toBe(false);
    });
    if (p.replay) {
      it(`${provider}: refuses a stale timestamp and a replay`, async () => {
        const r = runner({ provider, secret: p.secret });
        const stale = SECONDS - p.window! - 5;
        expect(await send(r, p.sign(BODY, stale))).toBe(403);
        const fresh = p.sign(BODY, SECONDS - 10);
        expect(await send(r, fresh)).toBe(200);
        expect(await send(r, fresh)).toBe(403);
        expect(r.events.eventsFor(r.owner)[0]!.message).toMatch(/replay/);
      });
    }
  }

  it('twilio: signs form posts as the URL followed by the sorted parameters', async () => {
    const body = Buffer.from('To=%2B15551234567&From=%2B15557654321&Body=hi+there');
    const url = 'https://hooks.burrow.test:8443/sms';
    const signed = `${url}Bodyhi thereFrom+15557654321To+15551234567`;
    const r = runner({ provider: 'twilio', secret: 'auth-token' });
    const headers = {
      'content-type': 'application/x-www-form-urlencoded',
      'x-twilio-signature': b64('sha1', 'auth-token', signed),
    };
    expect(await send(r, headers, body, '/sms')).toBe(200);
    expect(await send(r, headers, Buffer.from('To=%2B1&Body=x'), '/sms')).toBe(403);
  });

  it('hmac: a generic signature with the header, digest, encoding and prefix configured', async () => {
    const secret = randomBytes(16).toString('hex');
    const config = {
      provider: 'hmac',
      secret,
      header: 'X-Signature',
      algorithm: 'sha512',
      encoding: 'base64',
      prefix: 'sig=',
    };
    const r = runner(config);
    expect(await send(r, { 'x-signature': `sig=${b64('sha512', secret, BODY)}` })).toBe(200);
    expect(await send(r, { 'x-signature': `sig=${b64('sha256', secret, BODY)}` })).toBe(403);
    const timed = runner({ provider: 'hmac', secret, header: 'x-sig', timestamp_header: 'x-ts' });
    const sig = hex('sha256', secret, `${SECONDS}.${BODY.toString()}`);
    expect(await send(timed, { 'x-sig': sig, 'x-ts': String(SECONDS) })).toBe(200);
    expect(await send(timed, { 'x-sig': sig, 'x-ts': String(SECONDS) })).toBe(403);
  });

  it('enforce: false records what it would refuse and lets the request through', async () => {
    const r = runner({ provider: 'github', secret: 'abc', enforce: false });
    expect(await send(r, { 'x-hub-signature-256': 'sha256=00' })).toBe(200);
    expect(r.events.eventsFor(r.owner)[0]!.outcome).toBe('would-refuse-webhook');
  });

  it('exposes actions.ngrok.verify_webhook.verified to later rules', async () => {
    const policy = {
      on_http_request: [
        {
          actions: [
            { type: 'verify-webhook', config: { provider: 'gitlab', secret: 's', enforce: false } },
          ],
        },
        {
          expressions: ['!actions.ngrok.verify_webhook.verified'],
          actions: [{ type: 'custom-response', config: { status_code: 418 } }],
        },
      ],
    };
    const r = bindPolicy(policy, 'https');
    expect(await send(r, { 'x-gitlab-token': 'nope' })).toBe(418);
    expect(await send(r, { 'x-gitlab-token': 's' })).toBe(200);
  });

  it('forgets a replay key once it expires, on any clock (one starting at 0 too)', () => {
    for (const t0 of [0, NOW]) {
      const seen = new SeenSignatures();
      expect(seen.add('k', t0 + 100, t0)).toBe(true);
      expect(seen.add('k', t0 + 100, t0 + 100)).toBe(false);
      // Expired: the same key is new again, and then remembered again.
      expect(seen.add('k', t0 + 300, t0 + 101)).toBe(true);
      expect(seen.add('k', t0 + 300, t0 + 200)).toBe(false);
      expect(seen.add('other', t0 + 300, t0 + 200)).toBe(true);
    }
  });

  it('refuses at save time an unknown provider, a missing secret, and hmac keys elsewhere', () => {
    expect(() => runner({ provider: 'paypal', secret: 'x' })).toThrow(/must be one of .*github/);
    expect(() => runner({ provider: 'github' })).toThrow(/secret is required/);
    expect(() => runner({ provider: 'github', secret: 'x', header: 'x-a' })).toThrow(
      /only taken by provider "hmac"/,
    );
    expect(() => runner({ provider: 'hmac', secret: 'x' })).toThrow(/header is required/);
  });
});
