import http, { Agent } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  fakeTunnel,
  httpRequest,
  listenLocal,
  metricValue,
  startTestIngress,
  type FakeTunnel,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import {
  policyEndpoints,
  type PolicyEndpoints,
} from '../../../../test/support/policy-endpoints.js';
import { endpointLabel } from '../../metrics/endpoint-meters.js';
import { withPolicy } from '../../../../test/support/policy.js';

/**
 * forward-internal on the relay: the policy is run on the relay's parsed head, and the request is
 * carried as bytes to the internal endpoint it picks. The services send no `Date` header and the
 * relay passes their heads on as bytes: a reply without one is the service's, relayed.
 */
describe('forward-internal on the lean relay', () => {
  let t: TestIngress;
  let endpoints: PolicyEndpoints;
  const services: LocalServer[] = [];
  /** Service `name` answers `<name>:<path>`, with no Date header. */
  let service: (name: string) => Promise<number>;

  beforeAll(async () => {
    t = await startTestIngress();
    endpoints = policyEndpoints(t.registry);
    service = async (name) => {
      const server = await listenLocal(
        http.createServer((req, res) => {
          res.sendDate = false;
          res.end(`${name}:${req.url}${req.headers['x-added'] ? ' +' : ''}`);
        }),
      );
      services.push(server);
      return server.port;
    };
  });
  afterEach(() => endpoints.removeAll());
  afterAll(async () => {
    await t.close();
    await Promise.all(services.map((s) => s.close()));
  });

  const routeByPath = (api: string, web: string): string => `
on_http_request:
  - expressions: ["req.url.path.startsWith('/api/')"]
    actions: [{type: forward-internal, config: {url: "${api}"}}]
  - actions: [{type: forward-internal, config: {url: "${web}"}}]`;

  /** `count` requests over one kept-alive connection, or each on a new one (`fresh`). */
  async function requests(host: string, paths: string[], fresh = false) {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const replies = [];
      for (const path of paths) {
        replies.push(await httpRequest(t.httpPort, { host, path, agent: fresh ? false : agent }));
      }
      return replies;
    } finally {
      agent.destroy();
    }
  }

  it('carries a cloud endpoint’s requests to the internal endpoint its rules pick, as bytes', async () => {
    const api = endpoints.internalEndpoint('https', 'api-lean.internal', await service('api'));
    const web = endpoints.internalEndpoint('https', 'web-lean.internal', await service('web'));
    const cloud = endpoints.publicEndpoint(
      'http',
      0,
      routeByPath('https://api-lean.internal', 'https://web-lean.internal'),
      'cloud',
    );
    const onHttpRequest = vi.spyOn(cloud.policy!.runner, 'onHttpRequest');
    const replies = await requests(cloud.hostname!, ['/api/users', '/index.html', '/api/x']);
    expect(replies.map((r) => [r.status, r.body, r.headers.date])).toEqual([
      [200, 'api:/api/users', undefined],
      [200, 'web:/index.html', undefined],
      [200, 'api:/api/x', undefined],
    ]);
    expect(onHttpRequest).toHaveBeenCalledTimes(3);
    // Counted on the cloud endpoint and on each internal endpoint it went to.
    const count = (tunnel: FakeTunnel) =>
      metricValue(t.metrics, 'burrow_http_requests_total', {
        endpoint: endpointLabel(tunnel),
        code: '200',
      });
    expect([cloud, api, web].map(count)).toEqual([3, 2, 1]);
  });

  it('follows a chain of routing-only policies, and an agent endpoint whose rule does not match serves itself', async () => {
    endpoints.internalEndpoint('https', 'last-lean.internal', await service('last'));
    endpoints.internalEndpoint(
      'https',
      'mid-lean.internal',
      await service('mid'),
      'on_http_request: [{actions: [{type: forward-internal, config: {url: "https://last-lean.internal"}}]}]',
    );
    const front = endpoints.publicEndpoint(
      'http',
      await service('front'),
      `on_http_request: [{expressions: ["req.url.path == '/deep'"], actions: [{type: forward-internal, config: {url: "https://mid-lean.internal"}}]}]`,
    );
    const replies = await requests(front.hostname!, ['/deep', '/shallow']);
    expect(replies.map((r) => [r.body, r.headers.date])).toEqual([
      ['last:/deep', undefined],
      ['front:/shallow', undefined],
    ]);
  });

  it('carries the changes a policy made before the hop: the next endpoint judges, and the service gets, the changed request', async () => {
    endpoints.internalEndpoint('https', 'plain-lean.internal', await service('plain'));
    endpoints.internalEndpoint('https', 'added-lean.internal', await service('added'));
    // The internal endpoint routes on what the front changed: the header it added, the new path.
    endpoints.internalEndpoint(
      'https',
      'judge-lean.internal',
      0,
      `
on_http_request:
  - expressions: ["'x-added' in req.headers && req.url.path.startsWith('/v2/')"]
    actions: [{type: forward-internal, config: {url: "https://added-lean.internal"}}]
  - actions: [{type: forward-internal, config: {url: "https://plain-lean.internal"}}]`,
    );
    const front = endpoints.publicEndpoint(
      'http',
      0,
      `
on_http_request:
  - expressions: ["req.url.path.startsWith('/v1/')"]
    actions:
      - {type: add-headers, config: {headers: {x-added: "1"}}}
      - {type: url-rewrite, config: {from: "/v1/(.*)", to: "/v2/$1"}}
  - actions: [{type: forward-internal, config: {url: "https://judge-lean.internal"}}]`,
      'cloud',
    );
    const replies = await requests(front.hostname!, ['/v1/a?b=1', '/other']);
    expect(replies.map((r) => [r.status, r.body, r.headers.date])).toEqual([
      [200, 'added:/v2/a?b=1 +', undefined],
      [200, 'plain:/other', undefined],
    ]);
  });

  it("runs the forwarding endpoint's on_http_response after the internal endpoint's, and tells its circuit-breaker", async () => {
    const failing = await listenLocal(
      http.createServer((req, res) => {
        res.sendDate = false;
        res.statusCode = req.url === '/fail' ? 500 : 200;
        res.end(`inner:${req.url}`);
      }),
    );
    services.push(failing);
    endpoints.internalEndpoint(
      'https',
      'respond-lean.internal',
      failing.port,
      `
on_http_response:
  - expressions: ["req.url.path == '/replaced'"]
    actions: [{type: custom-response, config: {status_code: 418, body: "replaced inside"}}]
  - actions: [{type: add-headers, config: {headers: {x-inner: "1"}}}]
`,
    );
    const front = endpoints.publicEndpoint(
      'http',
      0,
      `
on_http_request:
  - actions:
      - {type: circuit-breaker, config: {error_threshold: 0.3, volume_threshold: 2, tripped_duration: 60s}}
      - {type: forward-internal, config: {url: "https://respond-lean.internal"}}
on_http_response:
  - expressions: ["res.headers['x-inner'][0] == '1'"]
    actions: [{type: add-headers, config: {headers: {x-outer-saw-inner: "yes"}}}]
  - actions: [{type: add-headers, config: {headers: {x-front: "1"}}}]
`,
      'cloud',
    );
    const [ok, replaced] = await requests(front.hostname!, ['/ok', '/replaced']);
    // Relayed (no Date), the internal endpoint's phase first, then the front's, which saw it.
    expect([ok!.status, ok!.body, ok!.headers.date]).toEqual([200, 'inner:/ok', undefined]);
    expect([ok!.headers['x-inner'], ok!.headers['x-outer-saw-inner']]).toEqual(['1', 'yes']);
    expect(ok!.headers['x-front']).toBe('1');
    // The internal endpoint's custom-response is final: the front's phase does not run on it.
    expect([replaced!.status, replaced!.body, replaced!.headers['x-front']]).toEqual([
      418,
      'replaced inside',
      undefined,
    ]);
    // A 500 of the internal endpoint's service is a third of three answers: the front's breaker
    // opens and answers itself.
    const after = await requests(front.hostname!, ['/fail', '/ok']);
    expect(after.map((r) => r.status)).toEqual([500, 503]);
    expect(after[1]!.body).not.toContain('inner:');
  });

  it('serves a request itself, with its own changes and response phase, when its target went offline (on_error: continue)', async () => {
    // Bound without the registry's view of internal endpoints, the policy forwards to one that
    // the relay then finds offline: the race of a target going away between the two.
    const own = withPolicy(
      fakeTunnel({
        proto: 'http',
        hostname: 'self-lean.burrow.test',
        upstreamPort: await service('self'),
      }),
      `
on_http_request:
  - actions:
      - {type: add-headers, config: {headers: {x-added: "1"}}}
      - {type: forward-internal, config: {url: "https://gone-lean.internal", on_error: continue}}
on_http_response:
  - actions: [{type: add-headers, config: {headers: {x-own: "1"}}}]
`,
    );
    t.registry.addTunnel(own);
    try {
      const [reply] = await requests(own.hostname!, ['/me']);
      expect([reply!.status, reply!.body, reply!.headers.date]).toEqual([
        200,
        'self:/me +',
        undefined,
      ]);
      expect(reply!.headers['x-own']).toBe('1');
    } finally {
      t.registry.removeTunnel(own.id);
    }
  });

  it('puts the body through each endpoint’s request-body-find-replace, the first endpoint’s first', async () => {
    const echo = await listenLocal(
      http.createServer((req, res) => {
        res.sendDate = false;
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => res.end(Buffer.concat(chunks)));
      }),
    );
    services.push(echo);
    const replace = (from: string, to: string): string =>
      `{type: request-body-find-replace, config: {replacements: [{from: "${from}", to: "${to}"}]}}`;
    endpoints.internalEndpoint(
      'https',
      'rewrite-lean.internal',
      echo.port,
      `on_http_request: [{actions: [${replace('b', 'c')}]}]`,
    );
    const front = endpoints.publicEndpoint(
      'http',
      0,
      `on_http_request: [{actions: [${replace('a', 'b')}, {type: forward-internal, config: {url: "https://rewrite-lean.internal"}}]}]`,
      'cloud',
    );
    const reply = await httpRequest(t.httpPort, {
      host: front.hostname!,
      path: '/',
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'a-b-x',
    });
    // a -> b at the front, then b -> c at the internal endpoint; relayed (no Date).
    expect([reply.status, reply.body, reply.headers.date]).toEqual([200, 'c-c-x', undefined]);
  });

  it('carries to an internal endpoint whose policy changes the request, deciding the front’s rules once', async () => {
    endpoints.internalEndpoint(
      'https',
      'edit-lean.internal',
      await service('edit'),
      `on_http_request:\n  - actions: [{type: add-headers, config: {headers: {x-added: "1"}}}]\n`,
    );
    const cloud = endpoints.publicEndpoint(
      'http',
      0,
      'on_http_request: [{actions: [{type: forward-internal, config: {url: "https://edit-lean.internal"}}]}]',
      'cloud',
    );
    const onHttpRequest = vi.spyOn(cloud.policy!.runner, 'onHttpRequest');
    const replies = await requests(cloud.hostname!, ['/a', '/b'], true);
    expect(replies.map((r) => r.body)).toEqual(['edit:/a +', 'edit:/b +']);
    // Relayed: no Date header, which Node's http server would add.
    expect(replies[0]!.headers.date).toBeUndefined();
    expect(onHttpRequest).toHaveBeenCalledTimes(2);
  });

  it('answers an offline target, a loop and a request a cloud endpoint leaves unhandled with the edge’s pages, on the relay', async () => {
    const offline = endpoints.publicEndpoint(
      'http',
      0,
      'on_http_request: [{actions: [{type: forward-internal, config: {url: "https://nobody-lean.internal"}}]}]',
      'cloud',
    );
    const onHttpRequest = vi.spyOn(offline.policy!.runner, 'onHttpRequest');
    const [gone] = await requests(offline.hostname!, ['/']);
    expect(gone!.status).toBe(502);
    expect(gone!.headers['burrow-error-code']).toBe('ERR_BURROW_INTERNAL_ENDPOINT_OFFLINE');
    expect(onHttpRequest).toHaveBeenCalledTimes(1);

    const forwardTo = (url: string) =>
      `on_http_request: [{actions: [{type: forward-internal, config: {url: "${url}"}}]}]`;
    endpoints.internalEndpoint('https', 'la.internal', 0, forwardTo('https://lb.internal'));
    endpoints.internalEndpoint('https', 'lb.internal', 0, forwardTo('https://la.internal'));
    const looped = endpoints.publicEndpoint('http', 0, forwardTo('https://la.internal'), 'cloud');
    const [loop] = await requests(looped.hostname!, ['/']);
    expect(loop!.status).toBe(508);
    expect(loop!.body).toContain('→ la.internal → lb.internal → la.internal');
    // A cloud endpoint with no matching rule: its error page.
    endpoints.internalEndpoint('https', 'served-lean.internal', await service('served'));
    const unmatched = endpoints.publicEndpoint(
      'http',
      0,
      `on_http_request: [{expressions: ["req.url.path == '/x'"], actions: [{type: forward-internal, config: {url: "https://served-lean.internal"}}]}]`,
      'cloud',
    );
    // On one connection: after the edge's pages the next request is still relayed (no Date).
    const [page, loopAgain, served] = await requests(unmatched.hostname!, ['/y', '/y', '/x']);
    expect(page!.status).toBe(502);
    expect(page!.headers['burrow-error-code']).toBe('ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED');
    expect(loopAgain!.status).toBe(502);
    expect([served!.status, served!.body, served!.headers.date]).toEqual([
      200,
      'served:/x',
      undefined,
    ]);
    const [again, andAgain] = await requests(offline.hostname!, ['/', '/']);
    expect([again!.status, andAgain!.status]).toEqual([502, 502]);
    expect(onHttpRequest).toHaveBeenCalledTimes(3);
  });

  it.each([
    ['no policy', undefined],
    [
      'a policy the relay cannot run',
      'on_http_request: [{actions: [{type: add-headers, config: {headers: {x-added: "1"}}}]}]',
    ],
  ])(
    'picks a pooled internal endpoint (%s) once per request: new connections alternate',
    async (_name, policy) => {
      const one = endpoints.internalEndpoint(
        'https',
        'pool-lean.internal',
        await service('one'),
        policy,
        {
          pooling: true,
        },
      );
      const two = endpoints.internalEndpoint(
        'https',
        'pool-lean.internal',
        await service('two'),
        policy,
        {
          pooling: true,
        },
      );
      expect([one.pooling, two.pooling]).toEqual([true, true]);
      const cloud = endpoints.publicEndpoint(
        'http',
        0,
        'on_http_request: [{actions: [{type: forward-internal, config: {url: "https://pool-lean.internal"}}]}]',
        'cloud',
      );
      const replies = await requests(cloud.hostname!, ['/1', '/2', '/3', '/4'], true);
      const served = replies.map((r) => r.body.split(':')[0]);
      expect(served.filter((s) => s === 'one')).toHaveLength(2);
      expect(served.filter((s) => s === 'two')).toHaveLength(2);
    },
  );
});
