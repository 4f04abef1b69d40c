import { once } from 'node:events';
import { connect } from 'node:net';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ValidationError } from '../../../core/errors.js';
import { validatePolicy } from '../../../policy/index.js';
import {
  fakeTunnel,
  httpRequest,
  rawExchange,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { withPolicy } from '../../../../test/support/policy.js';
import { POLICY_BODY_LIMIT, policyBodyBytesHeld } from './http-policy-body.js';
import { until } from '../../../../test/support/mux.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** GET `path` from the ingress on a fresh connection; the body as bytes (it may be gzipped). */
function bytesRequest(
  path: string,
  headers: Record<string, string>,
): Promise<{ body: Buffer; headers: IncomingMessage['headers'] }> {
  return new Promise((resolve, reject) => {
    request({ port: t.httpPort, host: '127.0.0.1', path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ body: Buffer.concat(chunks), headers: res.headers }));
    })
      .on('error', reject)
      .end();
  });
}

let t: TestIngress;
let upstream: LocalServer;
let n = 0;
/** Requests the upstream got. */
let served = 0;
/** Resolved by the SSE test's client when it has seen the first event. */
let firstEventSeen: Promise<void> = Promise.resolve();
const GZIPPED = gzipSync('the secret is out');

/** Routes of the upstream: each answers in its own awkward way. */
function serve(req: IncomingMessage, res: ServerResponse): void {
  served++;
  const path = req.url ?? '/';
  if (path === '/echo') {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          body: Buffer.concat(chunks).toString(),
          te: req.headers['transfer-encoding'] ?? null,
          length: req.headers['content-length'] ?? null,
        }),
      );
    });
    return;
  }
  req.resume();
  if (path === '/chunked') {
    // "password is hunter2" split mid-word, every piece its own chunk on the wire.
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
    const pieces = [
      'one: the pass',
      'word is hun',
      'ter2; two: the p',
      'assword is swordfish',
      '.',
    ];
    const next = (): void => {
      const piece = pieces.shift();
      if (piece === undefined) return void res.end();
      res.write(piece);
      setTimeout(next, 10);
    };
    next();
  } else if (path === '/length') {
    const body = JSON.stringify({ host: 'internal.corp', note: 'see internal.corp/docs' });
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  } else if (path === '/gzip') {
    res.writeHead(200, {
      'content-type': 'text/plain',
      'content-encoding': 'gzip',
      'content-length': GZIPPED.length,
    });
    res.end(GZIPPED);
  } else if (path === '/binary') {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': 12 });
    res.end('secret bytes');
  } else if (path === '/events') {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write('id: 1\ndata: first secret\n\n');
    // The second event only once the client has the first: nothing may sit on it in between.
    void firstEventSeen.then(async () => {
      await sleep(50);
      res.write('id: 2\ndata: second secret\n\n');
      await sleep(50);
      res.end('data: last\n\n');
    });
  } else {
    res.end('ok');
  }
}

beforeAll(async () => {
  t = await startTestIngress();
  upstream = await startHttpUpstream(serve);
});

afterAll(async () => {
  await t.close();
  await upstream.close();
});

/** A host whose tunnel has `policy` in front of the upstream. */
function policied(policy: string): string {
  const host = `bfr${++n}.burrow.test`;
  t.registry.addTunnel(
    withPolicy(fakeTunnel({ proto: 'http', hostname: host, upstreamPort: upstream.port }), policy),
  );
  return host;
}

const RESPONSE_POLICY = `
on_http_response:
  - actions:
      - type: response-body-find-replace
        config:
          replacements:
            - {from: 'password is ([a-z0-9]+)', to: 'password is [hidden, was $1 chars?]'}
            - {from: '\\[hidden, was [a-z0-9]+ chars\\?\\]', to: '[hidden]'}
            - {from: 'internal\\.corp', to: 'example.com'}
            - {from: 'secret', to: 'XXXX'}
`;

describe('response-body-find-replace', () => {
  it('replaces matches that span chunks, in order, and sends the body chunked', async () => {
    const host = policied(RESPONSE_POLICY);
    const reply = await httpRequest(t.httpPort, { host, path: '/chunked' });
    expect(reply.status).toBe(200);
    expect(reply.body).toBe('one: the password is [hidden]; two: the password is [hidden].');
    expect(reply.headers['transfer-encoding']).toBe('chunked');
    expect(reply.headers['content-length']).toBeUndefined();
  });

  it('drops the Content-Length of a rewritten body', async () => {
    const host = policied(RESPONSE_POLICY);
    const reply = await httpRequest(t.httpPort, { host, path: '/length' });
    expect(JSON.parse(reply.body)).toEqual({
      host: 'example.com',
      note: 'see example.com/docs',
    });
    expect(reply.headers['content-length']).toBeUndefined();
    expect(reply.headers['transfer-encoding']).toBe('chunked');
  });

  it('leaves compressed and binary bodies alone, Content-Length and all', async () => {
    const host = policied(RESPONSE_POLICY);
    const gz = await bytesRequest('/gzip', { host });
    expect(gz.body.equals(GZIPPED)).toBe(true);
    expect(gz.headers['content-length']).toBe(String(GZIPPED.length));
    const binary = await httpRequest(t.httpPort, { host, path: '/binary' });
    expect(binary.body).toBe('secret bytes');
    expect(binary.headers['content-length']).toBe('12');
  });

  it('rewrites before compress-response compresses', async () => {
    const host = policied(`
on_http_response:
  - actions:
      - {type: compress-response, config: {algorithms: [gzip]}}
      - type: response-body-find-replace
        config: {replacements: [{from: internal, to: public}]}
`);
    const res = await bytesRequest('/length', { host, 'accept-encoding': 'gzip' });
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(gunzipSync(res.body).toString())).toEqual({
      host: 'public.corp',
      note: 'see public.corp/docs',
    });
  });
});

describe('request-body-find-replace', () => {
  const policy = `
on_http_request:
  - actions:
      - type: request-body-find-replace
        config:
          replacements:
            - {from: '"card":\\s*"[0-9]{12}([0-9]{4})"', to: '"card": "****$1"'}
            - {from: 'ip=X', to: 'ip=\${conn.client_ip}'}
`;

  it('rewrites a Content-Length body and sends it upstream chunked', async () => {
    const host = policied(policy);
    const reply = await httpRequest(t.httpPort, {
      host,
      path: '/echo',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"card": "1234567890123456", "from": "ip=X"}',
    });
    expect(JSON.parse(reply.body)).toEqual({
      body: '{"card": "****3456", "from": "ip=127.0.0.1"}',
      te: 'chunked',
      length: null,
    });
  });

  it('rewrites a chunked body whose match is split between chunks', async () => {
    const host = policied(policy);
    const reply = await new Promise<string>((resolve, reject) => {
      const req = request(
        {
          port: t.httpPort,
          host: '127.0.0.1',
          path: '/echo',
          method: 'POST',
          headers: { host, 'content-type': 'application/json' },
          agent: false,
        },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve(body));
        },
      );
      req.on('error', reject);
      void (async () => {
        for (const piece of ['{"ca', 'rd": "12345678', '90123456"}']) {
          req.write(piece);
          await sleep(20);
        }
        req.end();
      })();
    });
    expect(JSON.parse(reply)).toEqual({
      body: '{"card": "****3456"}',
      te: 'chunked',
      length: null,
    });
  });

  it('rewrites an HTTP/1.0 body whole and sends it on with its new Content-Length', async () => {
    const host = policied(policy);
    const body = '{"card": "1234567890123456", "from": "ip=X"}';
    const reply = await rawExchange(
      t.httpPort,
      `POST /echo HTTP/1.0\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    const rewritten = '{"card": "****3456", "from": "ip=127.0.0.1"}';
    expect(JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4))).toEqual({
      body: rewritten,
      te: null,
      length: String(rewritten.length),
    });
  });

  it('refuses an HTTP/1.0 body whose rewrite grows over the limit (413); the service gets nothing', async () => {
    const host = policied(policy);
    const before = served;
    const size = POLICY_BODY_LIMIT + 1024;
    const socket = connect(t.httpPort, '127.0.0.1');
    socket.on('error', () => undefined);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.write(
      `POST /echo HTTP/1.0\r\nHost: ${host}\r\nContent-Type: text/plain\r\n` +
        `Content-Length: ${size}\r\n\r\n`,
    );
    socket.end(Buffer.alloc(size, 0x61));
    await once(socket, 'close');
    expect(Buffer.concat(chunks).toString('latin1')).toMatch(/^HTTP\/1\.1 413 /);
    expect(served).toBe(before);
  });

  it('gives a held HTTP/1.0 body back to the budget when the client leaves mid-body', async () => {
    const host = policied(policy);
    const held = policyBodyBytesHeld();
    const socket = connect(t.httpPort, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(
      `POST /echo HTTP/1.0\r\nHost: ${host}\r\nContent-Type: text/plain\r\n` +
        `Content-Length: ${1024 * 1024}\r\n\r\n`,
    );
    socket.write(Buffer.alloc(512 * 1024, 0x61));
    await until(() => policyBodyBytesHeld() > held);
    socket.destroy();
    await until(() => policyBodyBytesHeld() === held);
  });

  it('leaves a body that is not text alone', async () => {
    const host = policied(policy);
    const reply = await httpRequest(t.httpPort, {
      host,
      path: '/echo',
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: 'ip=X',
    });
    expect(JSON.parse(reply.body)).toEqual({ body: 'ip=X', te: null, length: '4' });
  });
});

describe('sse-find-replace', () => {
  it('rewrites each event and delivers it before the next is sent', async () => {
    const host = policied(`
on_http_response:
  - actions:
      - type: sse-find-replace
        config: {replacements: [{from: secret, to: '[redacted]'}]}
`);
    let seen!: () => void;
    firstEventSeen = new Promise<void>((resolve) => (seen = resolve));
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      request(
        { port: t.httpPort, host: '127.0.0.1', path: '/events', headers: { host }, agent: false },
        resolve,
      )
        .on('error', reject)
        .end();
    });
    expect(res.headers['content-type']).toBe('text/event-stream');
    res.setEncoding('utf8');
    const arrivals: string[] = [];
    let text = '';
    res.on('data', (c: string) => {
      text += c;
      arrivals.push(c);
      if (text.includes('first')) seen();
    });
    await once(res, 'end');
    expect(text).toBe(
      'id: 1\ndata: first [redacted]\n\nid: 2\ndata: second [redacted]\n\ndata: last\n\n',
    );
    // The first event reached the client on its own: the upstream waited for it.
    expect(arrivals[0]).toBe('id: 1\ndata: first [redacted]\n\n');
  });
});

describe('config', () => {
  const refusal = (policy: unknown): ValidationError => {
    try {
      validatePolicy(JSON.stringify(policy), 'http', 'traffic_policy.value');
    } catch (err) {
      return err as ValidationError;
    }
    throw new Error('accepted');
  };

  it('refuses a bad regex, naming the key', () => {
    const err = refusal({
      on_http_response: [
        {
          actions: [
            {
              type: 'response-body-find-replace',
              config: { replacements: [{ from: 'ok' }, { from: '(a', to: 'b' }] },
            },
          ],
        },
      ],
    });
    expect(err.code).toBe('ERR_NGROK_2204');
    expect(err.message).toMatch(
      /config\.replacements\[1\]\.from is not a valid regular expression/,
    );
  });

  it('refuses an action in the wrong phase, a $N past the groups, and a bad field', () => {
    expect(
      refusal({
        on_http_request: [
          { actions: [{ type: 'sse-find-replace', config: { replacements: [{ from: 'a' }] } }] },
        ],
      }).code,
    ).toBe('ERR_NGROK_2202');
    expect(
      refusal({
        on_http_request: [
          {
            actions: [
              {
                type: 'request-body-find-replace',
                config: { replacements: [{ from: 'a(b)', to: '$2' }] },
              },
            ],
          },
        ],
      }).message,
    ).toMatch(/replacements\[0\]\.to/);
    const field = refusal({
      on_http_response: [
        {
          actions: [
            {
              type: 'sse-find-replace',
              config: { replacements: [{ field: 'event', from: 'a' }] },
            },
          ],
        },
      ],
    });
    expect(field.message).toMatch(/config\.replacements\[0\]\.field must be data or retry/);
    expect(
      refusal({
        on_http_request: [
          { actions: [{ type: 'request-body-find-replace', config: { replacements: [] } }] },
        ],
      }).message,
    ).toMatch(/config\.replacements must have 1 to 10 entries/);
  });
});
