import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../../core/limits.js';
import {
  fakeTunnel,
  startHttpUpstream,
  startTestIngress,
  type LocalServer,
  type TestIngress,
} from '../../../../test/support/ingress.js';
import { ERROR_CODE_HEADER } from '../error-pages.js';

describe('the HTTP ingress header-count limit', () => {
  let t: TestIngress;
  let web: LocalServer;
  beforeAll(async () => {
    t = await startTestIngress({ limits: { ...DEFAULT_LIMITS, maxHeaderCount: 10 } });
    web = await startHttpUpstream((_req, res) => res.end('served'));
    t.registry.addTunnel(
      fakeTunnel({ proto: 'http', hostname: 'count.burrow.test', upstreamPort: web.port }),
    );
  });
  afterAll(async () => {
    await t.close();
    await web.close();
  });

  const get = (extra: number) =>
    new Promise<{ status: number; code: string | undefined; text: string }>((resolve, reject) => {
      const headers: Record<string, string> = { host: 'count.burrow.test' };
      for (let i = 0; i < extra; i++) headers[`x-h${i}`] = 'v';
      const req = request({ port: t.httpPort, host: '127.0.0.1', headers }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            code: res.headers[ERROR_CODE_HEADER.toLowerCase()] as string | undefined,
            text,
          }),
        );
      });
      req.on('error', reject);
      req.end();
    });

  it('serves a request within the limit and answers 431 with its error page beyond it', async () => {
    expect((await get(0)).text).toBe('served');
    const refused = await get(20);
    expect(refused.status).toBe(431);
    expect(refused.code).toBe('ERR_BURROW_TOO_MANY_HEADERS');
    expect(refused.text).toMatch(/--max-header-count/);
    expect(t.metrics.limitRefusals.with({ limit: 'ingress_header_count' }).value).toBe(1);
  });
});
