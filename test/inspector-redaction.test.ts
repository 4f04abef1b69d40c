import type { IncomingHttpHeaders } from 'node:http';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CurlApi, CurlReply } from './support/curl.js';
import {
  createAuthtoken,
  ingressCurl,
  startEdgeServer,
  type EdgeServer,
} from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Issue 27 item 9, as the attack: a visitor's `Authorization` and `Cookie` (and the service's
 * `Set-Cookie`, and the headers the operator names with `--inspect-redact-header`) went through a
 * real `burrow server` to a service behind the unmodified @ngrok/ngrok agent. Before, every API
 * key and dashboard user read them in clear at `GET /traffic/{id}`; now the inspector keeps them
 * redacted, whether bodies are captured or not, replays without them, and shows them only for an
 * endpoint switched to show credentials.
 */

const SECRET = 'secret';
const VISITOR = [
  ['Authorization', `Bearer ${SECRET}`],
  ['Cookie', `sid=${SECRET}`],
  ['X-Api-Key', SECRET],
  ['X-Session', SECRET],
] as const;

describe('the traffic inspector redacts visitors credentials', () => {
  let edge: EdgeServer;
  let api: CurlApi;
  let service: LocalServer;
  let session: ngrok.Session;
  let url: string;
  let host: string;
  /** What the service received, newest last. */
  const received: IncomingHttpHeaders[] = [];
  const curlUrl = ingressCurl(
    () => edge.ports,
    () => edge.caFile,
  );

  beforeAll(async () => {
    // Both forms of the repeatable flag: given twice, and a name in any case.
    edge = await startEdgeServer('sqlite', [
      ...['--inspect-redact-header', 'X-Api-Key'],
      ...['--inspect-redact-header', 'x-session'],
    ]);
    api = edge.api;
    service = await startHttpUpstream((req, res) => {
      received.push(req.headers);
      res.setHeader('Set-Cookie', `sid=${SECRET}-from-service; Path=/; HttpOnly`);
      res.setHeader('Content-Type', 'text/plain');
      res.end('hello visitor');
    });
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(api));
    const listener = await session
      .httpEndpoint()
      .listenAndForward(`http://127.0.0.1:${service.port}`);
    url = listener.url()!;
    host = new URL(url).hostname;
  }, 60_000);
  afterAll(async () => {
    await session?.close().catch(() => undefined);
    await service?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  /** A visitor's request with credentials; the service gets them as sent. */
  const visit = async (): Promise<void> => {
    // HTTP/1.1, so the inspector keeps the names as the visitor wrote them (HTTP/2 lowercases).
    const res = await curlUrl(url, '/account', [
      '--http1.1',
      ...VISITOR.flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
    ]);
    expect(res.status, res.text).toBe(200);
    expect(received.at(-1)?.authorization).toBe(`Bearer ${SECRET}`);
    expect(received.at(-1)?.cookie).toBe(`sid=${SECRET}`);
  };

  /** The newest request of the endpoint, once answered, as `GET /traffic/{id}` returns it. */
  const newest = async (): Promise<CurlReply> => {
    for (;;) {
      const list = await api.get(`/traffic?host=${host}&limit=1`);
      expect(list.status).toBe(200);
      expect(list.text).not.toContain(SECRET);
      const [summary] = list.body.requests as Array<{ id: string; status: number | null }>;
      // The record is answered when the edge has closed the response, just after curl returns.
      if (summary?.status !== null && summary !== undefined)
        return api.get(`/traffic/${summary.id}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const expectRedacted = (detail: CurlReply): void => {
    expect(detail.status).toBe(200);
    expect(detail.text).not.toContain(SECRET);
    expect(detail.body.credentials_shown).toBe(false);
    expect(detail.body.request_headers).toEqual(
      expect.arrayContaining([
        ['Authorization', 'Bearer [redacted, 6 chars]'],
        ['Cookie', 'sid=[redacted, 6 chars]'],
        ['X-Api-Key', '[redacted, 6 chars]'],
        ['X-Session', '[redacted, 6 chars]'],
      ]),
    );
    expect(detail.body.response_headers).toContainEqual([
      'set-cookie',
      'sid=[redacted, 19 chars]; Path=/; HttpOnly',
    ]);
  };

  it('keeps no credential in clear in GET /traffic/{id} with body capture off', async () => {
    await visit();
    const detail = await newest();
    expectRedacted(detail);
    expect(detail.body.request_body).toBeNull();
  });

  it('keeps no credential in clear with body capture on', async () => {
    const capture = await api.put(`/traffic/capture/${host}`, { enabled: true });
    expect(capture.status).toBe(200);
    try {
      await visit();
      const detail = await newest();
      expectRedacted(detail);
      expect(detail.body.response_body.text).toBe('hello visitor');
    } finally {
      await api.put(`/traffic/capture/${host}`, { enabled: false });
    }
  });

  it('replays without the redacted headers and says which it left out', async () => {
    await visit();
    const original = await newest();
    const replay = await api.post(`/traffic/${original.body.id}/replay`, {});
    expect(replay.status, replay.text).toBe(201);
    expect(replay.body.omitted_headers).toEqual([
      'authorization',
      'cookie',
      'x-api-key',
      'x-session',
    ]);
    const sent = received.at(-1)!;
    expect(sent['x-burrow-replay-of']).toBe(original.body.id);
    for (const name of ['authorization', 'cookie', 'x-api-key', 'x-session'])
      expect(sent[name], name).toBeUndefined();
    expect(JSON.stringify(sent)).not.toContain('redacted');
    const replayed = await newest();
    expect(replayed.body.replay_of).toBe(original.body.id);
    expect(replayed.text).not.toContain(SECRET);
  });

  it('shows them, and replays with them, once the endpoint is switched to show credentials', async () => {
    await visit();
    const before = await newest();
    const shown = await api.put(`/traffic/credentials/${host}`, { shown: true });
    expect(shown.status, shown.text).toBe(200);
    expect(shown.body).toEqual({ host, shown: true, unanswered_nodes: [] });
    try {
      expect((await api.get('/traffic')).body.credentials_shown_hosts).toEqual([host]);
      // Only requests from now on: one recorded redacted stays so.
      expect((await api.get(`/traffic/${before.body.id}`)).text).not.toContain(SECRET);
      await visit();
      const detail = await newest();
      expect(detail.body.credentials_shown).toBe(true);
      expect(detail.body.request_headers).toEqual(
        expect.arrayContaining([
          ['Authorization', `Bearer ${SECRET}`],
          ['Cookie', `sid=${SECRET}`],
          ['X-Api-Key', SECRET],
        ]),
      );
      expect(detail.body.response_headers).toContainEqual([
        'set-cookie',
        `sid=${SECRET}-from-service; Path=/; HttpOnly`,
      ]);
      const replay = await api.post(`/traffic/${detail.body.id}/replay`, {});
      expect(replay.body.omitted_headers).toEqual([]);
      expect(received.at(-1)?.authorization).toBe(`Bearer ${SECRET}`);
    } finally {
      await api.put(`/traffic/credentials/${host}`, { shown: false });
    }
    await visit();
    expectRedacted(await newest());
  });
});
