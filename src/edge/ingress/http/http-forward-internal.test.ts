import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { endpointLabel } from '../../metrics/endpoint-meters.js';
import { MAX_FORWARD_HOPS } from '../../registry/internal-routing.js';
import {
  policyEndpoints,
  type PolicyEndpoints,
} from '../../../../test/support/policy-endpoints.js';
import { startTestUpstream, type TestUpstream } from '../../../../test/support/http-upstream.js';
import {
  httpRequest,
  metricValue,
  startTestIngress,
  type FakeTunnel,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import {
  websocketExchange,
  websocketUpgrade,
  type WebsocketReply,
} from '../../../../test/support/websocket.js';

/**
 * forward-internal for WebSocket (and other) upgrades on the HTTP ingress, over real sockets: a
 * public agent or cloud endpoint hands the upgrade to an internal endpoint whose service is a
 * WebSocket echo, with the same loop, hop, offline and on_error answers as plain requests (both
 * are checked).
 */

let t: TestIngress;
let echo: TestUpstream;
let endpoints: PolicyEndpoints;
const open: Socket[] = [];

beforeAll(async () => {
  t = await startTestIngress();
  echo = await startTestUpstream();
  endpoints = policyEndpoints(t.registry);
});

afterEach(() => {
  for (const socket of open.splice(0)) socket.destroy();
  endpoints.removeAll();
});

afterAll(async () => {
  await t.close();
  await echo.close();
});

/** A public agent endpoint in front of the echo, or a cloud endpoint (nothing behind it). */
const publicEndpoint = (policy: string, kind: 'agent' | 'cloud' = 'agent'): FakeTunnel =>
  endpoints.publicEndpoint('http', echo.port, policy, kind);

/** An internal endpoint (`name`) whose agent's service is the WebSocket echo. */
const internalEndpoint = (
  name: string,
  policy?: string,
  options: { pooling?: boolean } = {},
): FakeTunnel => endpoints.internalEndpoint('https', name, echo.port, policy, options);

const forwardTo = (url: string, extra = ''): string => `
on_http_request:
  - expressions: ["req.url.path.startsWith('/ws')"]
    actions:
      - type: forward-internal
        config: { url: "${url}"${extra} }`;

/** A WebSocket handshake to the ingress's plain HTTP port; an upgraded socket is closed after the test. */
async function upgrade(host: string, path = '/ws'): Promise<WebsocketReply> {
  const reply = await websocketUpgrade(t.httpPort, host, path);
  if ('socket' in reply) open.push(reply.socket);
  return reply;
}

const exchange = websocketExchange;

describe('forward-internal for upgrades (WebSocket)', () => {
  it('carries a WebSocket from an agent endpoint to the internal endpoint and back', async () => {
    // The internal endpoint's own policy runs, and sees the header the public one added.
    const internal = internalEndpoint(
      'ws.internal',
      `
on_http_request:
  - expressions: ["!('x-via' in req.headers)"]
    actions: [{type: deny, config: {status_code: 403}}]`,
    );
    const pub = publicEndpoint(`
on_http_request:
  - expressions: ["req.url.path.startsWith('/ws')"]
    actions:
      - type: add-headers
        config: { headers: { x-via: public } }
      - type: forward-internal
        config: { url: https://ws.internal }`);
    const reply = await upgrade(pub.hostname!);
    expect(reply.status).toBe(101);
    expect(reply.headers['x-seen-forwarded-for']).toBe('127.0.0.1');
    expect(await exchange(reply, ['hello', 'through two endpoints', 'bye'])).toEqual([
      'HELLO',
      'THROUGH TWO ENDPOINTS',
      'BYE',
    ]);
    expect(internal.connects).toHaveLength(1);
    expect(pub.connects).toHaveLength(0);

    // Not under /ws: the agent endpoint relays the upgrade to its own agent, as before.
    const own = await upgrade(pub.hostname!, '/other');
    expect(await exchange(own, ['mine'])).toEqual(['MINE']);
    expect(pub.connects).toHaveLength(1);
    expect(internal.connects).toHaveLength(1);
  });

  it('carries a WebSocket from a cloud endpoint, and answers what it does not forward', async () => {
    const internal = internalEndpoint('cloudws.internal');
    const cloud = publicEndpoint(
      `${forwardTo('https://cloudws.internal')}
  - expressions: ["req.url.path == '/hello'"]
    actions: [{type: custom-response, config: {status_code: 200, body: "cloud says hi"}}]`,
      'cloud',
    );
    const reply = await upgrade(cloud.hostname!);
    expect(reply.status).toBe(101);
    expect(await exchange(reply, ['ping'])).toEqual(['PING']);
    expect(internal.connects).toHaveLength(1);

    // The cloud endpoint's own answer, then a clear error for the rest: never a hang.
    const answered = await upgrade(cloud.hostname!, '/hello');
    expect(answered).toMatchObject({ status: 200, body: 'cloud says hi' });
    const started = Date.now();
    const unhandled = await upgrade(cloud.hostname!, '/elsewhere');
    expect(unhandled.status).toBe(502);
    expect(unhandled.headers['burrow-error-code']).toBe('ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(cloud.connects).toHaveLength(0);
  });

  it('refuses a forward loop on an upgrade with 508 and the chain', async () => {
    const a = internalEndpoint('loop-a.internal', forwardTo('https://loop-b.internal'));
    const b = internalEndpoint('loop-b.internal', forwardTo('https://loop-a.internal'));
    const pub = publicEndpoint(forwardTo('https://loop-a.internal'));
    const reply = await upgrade(pub.hostname!);
    expect(reply.status).toBe(508);
    expect(reply.headers['burrow-error-code']).toBe('ERR_BURROW_FORWARD_LOOP');
    expect('body' in reply && reply.body).toContain(
      `${pub.hostname!} → loop-a.internal → loop-b.internal → loop-a.internal`,
    );
    expect([a, b, pub].map((tunnel) => tunnel.connects.length)).toEqual([0, 0, 0]);
    // The same as for a plain request.
    const plain = await httpRequest(t.httpPort, { host: pub.hostname!, path: '/ws' });
    expect(plain.status).toBe(508);
    expect(plain.headers['burrow-error-code']).toBe('ERR_BURROW_FORWARD_LOOP');
  });

  it('refuses an upgrade over the hop limit with 508', async () => {
    const names = Array.from({ length: MAX_FORWARD_HOPS + 1 }, (_, i) => `hop${i}.internal`);
    names.forEach((name, i) =>
      internalEndpoint(
        name,
        i + 1 < names.length ? forwardTo(`https://${names[i + 1]}`) : undefined,
      ),
    );
    const pub = publicEndpoint(forwardTo(`https://${names[0]}`));
    const reply = await upgrade(pub.hostname!);
    expect(reply.status).toBe(508);
    expect('body' in reply && reply.body).toMatch(new RegExp(`went through ${MAX_FORWARD_HOPS}`));
    // The same for a plain request.
    const plain = await httpRequest(t.httpPort, { host: pub.hostname!, path: '/ws' });
    expect(plain.status).toBe(508);
    expect(plain.body).toMatch(new RegExp(`went through ${MAX_FORWARD_HOPS}`));
  });

  it('answers an upgrade forwarded to a missing internal endpoint (on_error halt) with 502', async () => {
    const pub = publicEndpoint(forwardTo('https://gone.internal'));
    const started = Date.now();
    const reply = await upgrade(pub.hostname!);
    expect(reply.status).toBe(502);
    expect(reply.headers['burrow-error-code']).toBe('ERR_BURROW_INTERNAL_ENDPOINT_OFFLINE');
    expect('body' in reply && reply.body).toMatch(/gone\.internal/);
    expect(Date.now() - started).toBeLessThan(2000);
    const plain = await httpRequest(t.httpPort, { host: pub.hostname!, path: '/ws' });
    expect(plain.status).toBe(502);
    expect(plain.headers['burrow-error-code']).toBe('ERR_BURROW_INTERNAL_ENDPOINT_OFFLINE');
    expect(pub.connects).toHaveLength(0);
  });

  it('lets the endpoint itself take the upgrade with on_error continue', async () => {
    const pub = publicEndpoint(forwardTo('https://absent.internal', ', on_error: continue'));
    const reply = await upgrade(pub.hostname!);
    expect(reply.status).toBe(101);
    expect(await exchange(reply, ['fallback'])).toEqual(['FALLBACK']);
    expect(pub.connects).toHaveLength(1);
    // A plain request too: the endpoint's own agent answers it.
    const plain = await httpRequest(t.httpPort, { host: pub.hostname!, path: '/ws/plain' });
    expect(plain.status).toBe(200);
    expect(pub.connects.length).toBeGreaterThan(1);
    // A cloud endpoint has nothing to fall back to.
    const cloud = publicEndpoint(
      forwardTo('https://absent.internal', ', on_error: continue'),
      'cloud',
    );
    const refused = await upgrade(cloud.hostname!);
    expect(refused.status).toBe(502);
    expect(refused.headers['burrow-error-code']).toBe('ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED');
    const plainRefused = await httpRequest(t.httpPort, { host: cloud.hostname!, path: '/ws' });
    expect(plainRefused.status).toBe(502);
    expect(plainRefused.headers['burrow-error-code']).toBe('ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED');
  });

  it('spreads upgrades over a pooled internal endpoint', async () => {
    const one = internalEndpoint('pool-ws.internal', undefined, { pooling: true });
    const two = internalEndpoint('pool-ws.internal', undefined, { pooling: true });
    const pub = publicEndpoint(forwardTo('https://pool-ws.internal'));
    const replies: WebsocketReply[] = [];
    for (let i = 0; i < 4; i++) {
      const reply = await upgrade(pub.hostname!);
      expect(await exchange(reply, [`m${i}`])).toEqual([`M${i}`]);
      replies.push(reply);
    }
    expect(one.connects).toHaveLength(2);
    expect(two.connects).toHaveLength(2);
    // A member that goes leaves the pool: the next upgrades all go to the other.
    t.registry.removeTunnel(one.id);
    for (let i = 0; i < 2; i++) {
      const reply = await upgrade(pub.hostname!);
      expect(reply.status).toBe(101);
    }
    expect(two.connects).toHaveLength(4);
  });

  it('meters the upgrade on every endpoint it went through', async () => {
    const internal = internalEndpoint('metered.internal');
    const pub = publicEndpoint(forwardTo('https://metered.internal'));
    const reply = await upgrade(pub.hostname!);
    expect(await exchange(reply, ['count me'])).toEqual(['COUNT ME']);
    for (const tunnel of [pub, internal]) {
      const endpoint = endpointLabel(tunnel);
      expect(metricValue(t.metrics, 'burrow_http_requests_total', { endpoint, code: '101' })).toBe(
        1,
      );
    }
  });
});
