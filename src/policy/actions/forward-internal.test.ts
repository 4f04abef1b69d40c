import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../core/errors.js';
import { compilePolicy } from '../compile.js';
import type { PolicyProtocol } from '../parse.js';
import { internalTarget } from './forward-internal.js';

const compile = (policy: unknown, protocol: PolicyProtocol = 'https') =>
  compilePolicy(JSON.stringify(policy), { protocol, field: 'traffic_policy' });

const request = (config: Record<string, unknown>, expressions: string[] = []) => ({
  on_http_request: [{ expressions, actions: [{ type: 'forward-internal', config }] }],
});

function refusal(policy: unknown, protocol?: PolicyProtocol): ValidationError {
  try {
    compile(policy, protocol);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

const conn = { client_ip: '203.0.113.9', client_port: 1, server_ip: '127.0.0.1', server_port: 80 };
const req = (path: string, headers: Record<string, string> = {}) => ({
  method: 'GET',
  url: path,
  scheme: 'https' as const,
  headers,
  version: '1.1',
});

describe('forward-internal', () => {
  it('names the internal endpoint a URL points at', () => {
    expect(internalTarget('https://API.internal/x')).toEqual({
      scheme: 'https',
      key: 'api.internal',
      host: 'api.internal',
    });
    expect(internalTarget('tcp://db.internal:5432')?.key).toBe('db.internal:5432');
    expect(internalTarget('not a url')).toBeUndefined();
  });

  it('refuses a public URL, another binding, a bad on_error, and the wrong phase at save', () => {
    const pub = refusal(request({ url: 'https://example.com' }));
    expect(pub.code).toBe('ERR_NGROK_2204');
    expect(pub.message).toMatch(
      /must name an internal endpoint.*'https:\/\/example\.com' is public/,
    );
    expect(refusal(request({ url: 'https://a.internal', binding: 'public' })).message).toMatch(
      /binding must be "internal"/,
    );
    expect(refusal(request({ url: 'https://a.internal', on_error: 'retry' })).message).toMatch(
      /on_error must be "halt" or "continue"/,
    );
    expect(refusal(request({ url: 'tcp://a.internal:1' })).message).toMatch(
      /http:\/\/ or https:\/\//,
    );
    const tcpOnHttp = {
      on_tcp_connect: [
        { actions: [{ type: 'forward-internal', config: { url: 'tcp://a.internal:1' } }] },
      ],
    };
    expect(refusal(tcpOnHttp, 'https').message).toMatch(/place it in on_http_request/);
    expect(() => compile(tcpOnHttp, 'tcp')).not.toThrow();
  });

  it('is chosen by CEL: path, header and client IP route to different internal endpoints', async () => {
    const policy = compile({
      on_http_request: [
        {
          expressions: ["req.url.path.startsWith('/api/')"],
          actions: [{ type: 'forward-internal', config: { url: 'https://api.internal' } }],
        },
        {
          expressions: ["'x-canary' in req.headers"],
          actions: [{ type: 'forward-internal', config: { url: 'https://canary.internal' } }],
        },
        {
          expressions: ["conn.client_ip == '203.0.113.9'"],
          actions: [{ type: 'forward-internal', config: { url: 'https://office.internal' } }],
        },
      ],
    });
    const runner = policy.bind({ ownerId: 'ep_test' });
    const target = async (
      path: string,
      headers: Record<string, string> = {},
      ip = '203.0.113.9',
    ) => {
      const d = await runner.onHttpRequest({
        conn: { ...conn, client_ip: ip },
        req: req(path, headers),
      });
      return d.kind === 'continue' ? d.forwardInternal?.url : d.kind;
    };
    expect(await target('/api/users')).toBe('https://api.internal');
    expect(await target('/', { 'x-canary': '1' })).toBe('https://canary.internal');
    expect(await target('/')).toBe('https://office.internal');
    expect(await target('/', {}, '198.51.100.1')).toBeUndefined();
  });

  it('with on_error: continue, skips a target that is not online and runs the next action', async () => {
    const policy = compile({
      on_http_request: [
        {
          actions: [
            {
              type: 'forward-internal',
              config: { url: 'https://gone.internal', on_error: 'continue' },
            },
            { type: 'custom-response', config: { status_code: 503, body: 'fallback' } },
          ],
        },
      ],
    });
    const online = new Set<string>();
    const runner = policy.bind({ ownerId: 'ep_test', internalOnline: (u) => online.has(u) });
    const first = await runner.onHttpRequest({ conn, req: req('/') });
    expect(first).toMatchObject({ kind: 'respond', status: 503, body: 'fallback' });
    online.add('https://gone.internal');
    const second = await runner.onHttpRequest({ conn, req: req('/') });
    expect(second).toMatchObject({
      kind: 'continue',
      forwardInternal: { url: 'https://gone.internal', onError: 'continue' },
    });
  });
});
