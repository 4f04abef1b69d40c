import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestDatabase } from './support/stores.js';
import type { CurlApi } from './support/curl.js';
import { createAuthtoken, type EdgePorts, startEdgeServer } from './support/edge-listeners.js';
import type { BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * The limit options of issue 14 reach a real `burrow server`: set by flags, enforced with each
 * protocol's refusal, and counted in /metrics by limit.
 */
describe('limit options on a burrow server process', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let api: CurlApi;
  let ports: EdgePorts;
  let caPem: string;
  const sessions: ngrok.Session[] = [];
  const refusals = async (limit: string): Promise<number> => {
    const text = (await api.get('/metrics')).text;
    const line = text
      .split('\n')
      .find((l) => l.startsWith(`burrow_limit_refusals_total{limit="${limit}"}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };

  beforeAll(async () => {
    ({ db, ports, server, api, caPem } = await startEdgeServer('sqlite', [
      '--api-max-body-bytes',
      '4096',
      '--api-max-json-depth',
      '8',
      '--agent-max-tunnels-per-session',
      '1',
    ]));
  }, 60_000);
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await server?.stop(20_000);
    await db?.drop();
  });

  it('API: 413 over --api-max-body-bytes, 400 over --api-max-json-depth, both counted', async () => {
    const big = await api.post('/bot_users', { name: 'x'.repeat(5000) });
    expect(big.status).toBe(413);
    expect(big.body).toMatchObject({ details: { field: 'body', rule: 'at most 4096 bytes' } });
    let deep: unknown = {};
    for (let i = 0; i < 10; i++) deep = { a: deep };
    const nested = await api.post('/bot_users', { name: 'deep', x: deep });
    expect(nested.status).toBe(400);
    expect(nested.body.msg).toMatch(/nested deeper than 8 levels/);
    expect(await refusals('api_body_bytes')).toBe(1);
    expect(await refusals('api_json_depth')).toBe(1);
  });

  it('agent: a second tunnel on one session is refused with ERR_NGROK_324, and counted', async () => {
    const session = await connectNgrok(ports, caPem, await createAuthtoken(api));
    sessions.push(session);
    await session.tcpEndpoint().listen();
    const second = await session
      .tcpEndpoint()
      .listen()
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(String((second as Error | undefined)?.message)).toContain('ERR_NGROK_324');
    expect(await refusals('agent_tunnels_per_session')).toBe(1);
  });
});
