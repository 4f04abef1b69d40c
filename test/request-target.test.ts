import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthtoken, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { rawExchange, startHttpUpstream, type LocalServer } from './support/ingress.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * One reading of the request target (issue 27 item 2), on a real `burrow server` with the
 * unmodified @ngrok/ngrok agent: every form of target a client may send, to an endpoint whose
 * policy tells the service what it saw as `req.url.path` and `req.url.raw_path`, and to one
 * without a policy. For each, what the policy sees, what
 * routes and what the service receives are the same path, or the edge answers 400 and the
 * service sees nothing. docs/security.md, "One reading of the request target".
 */

/** The policy shows the service what it judged. */
const SHOW_POLICY_VIEW = `
on_http_request:
  - actions:
      - type: add-headers
        config:
          headers:
            x-policy-path: "\${req.url.path}"
            x-policy-raw-path: "\${req.url.raw_path}"
`;

/** What the service saw of one request. */
interface Seen {
  url: string;
  host: string | undefined;
  policyPath: string | undefined;
  policyRawPath: string | undefined;
}

/** [request line (HOST is the endpoint's name), the path the service gets, or 400]. */
const TABLE: ReadonlyArray<[string, string | 400]> = [
  ['GET /admin?x=1', '/admin?x=1'],
  ['GET http://HOST/admin', '/admin'],
  ['GET https://HOST/admin?x=1', '/admin?x=1'],
  ['GET http://HOST:8080/admin', '/admin'],
  ['GET HTTP://HOST', '/'],
  ['GET http://other.example/admin', 400],
  ['GET http://user:secret@HOST/admin', 400],
  ['CONNECT HOST:443', 400],
  ['OPTIONS *', 400],
  ['GET /./admin', '/admin'],
  ['GET /public/../admin', '/admin'],
  ['GET /%2e/admin', '/admin'],
  ['GET /public/%2E%2e/admin', '/admin'],
  ['GET http://HOST/public/.%2e/admin', '/admin'],
  ['GET /admin%2fsecret', '/admin%2fsecret'],
  ['GET /public%2f..%2fadmin', 400],
  ['GET /public\\..\\admin', 400],
  ['GET /admin#frag', 400],
];

describe('one reading of the request target, through a real server and agent', () => {
  let edge: EdgeServer;
  let service: LocalServer;
  let session: ngrok.Session;
  let policied: string;
  let lean: string;
  const seen: Seen[] = [];

  beforeAll(async () => {
    edge = await startEdgeServer('sqlite');
    service = await startHttpUpstream((req, res) => {
      const header = (name: string): string | undefined => {
        const value = req.headers[name];
        return typeof value === 'string' ? value : undefined;
      };
      seen.push({
        url: req.url ?? '',
        host: req.headers.host,
        policyPath: header('x-policy-path'),
        policyRawPath: header('x-policy-raw-path'),
      });
      res.end('ok');
    });
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const to = `http://127.0.0.1:${service.port}`;
    const judged = await session
      .httpEndpoint()
      .trafficPolicy(SHOW_POLICY_VIEW)
      .listenAndForward(to);
    policied = new URL(judged.url()!).hostname;
    const plain = await session.httpEndpoint().listenAndForward(to);
    lean = new URL(plain.url()!).hostname;
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  const send = (host: string, line: string, extra = ''): Promise<string> =>
    rawExchange(
      edge.ports.http,
      `${line.replaceAll('HOST', host)} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`,
    );

  describe.each([
    ['a policy that changes the request', () => policied, true],
    ['no policy', () => lean, false],
  ])('%s', (_name, host, judged) => {
    it.each(TABLE)('%s', async (line, expected) => {
      const before = seen.length;
      const reply = await send(host(), line);
      if (expected === 400) {
        expect(reply).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
        expect(seen.length, 'the service got the request').toBe(before);
        return;
      }
      expect(reply).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(seen.length).toBe(before + 1);
      const got = seen[before]!;
      expect(got.url).toBe(expected);
      expect(got.host).toBe(host());
      if (judged) {
        const rawPath = expected.split('?')[0]!;
        expect(got.policyRawPath).toBe(rawPath);
        expect(got.policyPath).toBe(decodeURIComponent(rawPath));
      }
    });
  });

  it('a refused target gets the edge page naming the problem; a HEAD gets its head alone', async () => {
    const got = await send(lean, 'GET /public%2f..%2fadmin', 'Accept: text/plain\r\n');
    expect(got).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(got).toMatch(/\r\nburrow-error-code: ERR_BURROW_BAD_REQUEST_TARGET\r\n/i);
    expect(got).toContain('The request target cannot be served');
    const head = await send(lean, 'HEAD /public%2f..%2fadmin');
    expect(head).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(head.endsWith('\r\n\r\n')).toBe(true);
  });

  it('a pipelined absolute-form request is read the same way', async () => {
    const before = seen.length;
    const host = policied;
    const reply = await rawExchange(
      edge.ports.http,
      `GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET http://${host}/x/%2e%2e/admin HTTP/1.1\r\nHost: ${host}\r\n\r\n` +
        `GET http://other.example/secret HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    // Bodies carry no line end: the next status line follows the previous body directly.
    expect(reply.match(/HTTP\/1\.1 \d{3}/g)).toEqual([
      'HTTP/1.1 200',
      'HTTP/1.1 200',
      'HTTP/1.1 400',
    ]);
    expect(reply).toContain('ERR_BURROW_BAD_REQUEST_TARGET');
    expect(seen.slice(before).map((s) => [s.url, s.policyRawPath])).toEqual([
      ['/', '/'],
      ['/admin', '/admin'],
    ]);
  });

  it('a deny on /admin holds for every spelling of /admin', async () => {
    const ep = await session
      .httpEndpoint()
      .trafficPolicy(
        `on_http_request: [{expressions: ["req.url.path.startsWith('/admin')"], actions: [{type: deny}]}]`,
      )
      .listenAndForward(`http://127.0.0.1:${service.port}`);
    const host = new URL(ep.url()!).hostname;
    const before = seen.length;
    for (const line of [
      'GET /admin',
      'GET https://HOST/admin',
      'GET http://HOST:80/admin/x',
      'GET /public/../admin',
      'GET /%2e/admin',
      'GET /%61dmin',
      'GET /admin%2fsecret',
    ]) {
      expect(await send(host, line), line).toMatch(/^HTTP\/1\.1 403 /);
    }
    expect(await send(host, 'GET /public')).toMatch(/^HTTP\/1\.1 200 /);
    expect(seen.slice(before).map((s) => s.url)).toEqual(['/public']);
    await ep.close();
  });
});
