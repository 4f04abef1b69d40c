import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fakeTunnel,
  httpRequest,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { withPolicy } from '../../../../test/support/policy.js';
import { ERROR_CODE_HEADER } from '../error-pages.js';

const HOST = 'responses.burrow.test';
const NOTE_FROM_QUERY = `
on_http_response:
  - actions:
      - type: add-headers
        config: {headers: {x-note: "\${req.url.query_params['a'][0]}"}}
`;

describe('writeUpstreamResponse', () => {
  let t: TestIngress;
  let web: LocalServer;
  beforeAll(async () => {
    t = await startTestIngress();
    // The agent's own headers come before the ones the policy adds.
    web = await startHttpUpstream((_req, res) => {
      res.writeHead(200, 'Fine', ['Set-Cookie', 'session=agent', 'Content-Length', '7']);
      res.end('service');
    });
    t.registry.addTunnel(
      withPolicy(
        fakeTunnel({ proto: 'http', hostname: HOST, upstreamPort: web.port }),
        NOTE_FROM_QUERY,
      ),
    );
  });
  afterAll(async () => {
    await t.close();
    await web.close();
  });

  it('relays a writable head with what the policy added', async () => {
    const reply = await httpRequest(t.httpPort, { host: HOST, path: '/?a=fine' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-note']).toBe('fine');
    expect(reply.body).toBe('service');
  });

  it('answers an added value with CR LF with the 502 page alone, none of the agent head', async () => {
    const reply = await httpRequest(t.httpPort, {
      host: HOST,
      path: '/?a=x%0d%0aSet-Cookie:%20injected=1',
    });
    expect(reply.status).toBe(502);
    expect(reply.headers[ERROR_CODE_HEADER.toLowerCase()]).toBe('ERR_BURROW_UNSAFE_RESPONSE_HEAD');
    expect(reply.headers['set-cookie']).toBeUndefined();
    expect(reply.headers['x-note']).toBeUndefined();
    expect(reply.body).toContain('a control character in the value of x-note');
    expect(Number(reply.headers['content-length'])).toBe(Buffer.byteLength(reply.body));
  });
});
