import { readFileSync } from 'node:fs';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import type { TestDatabase } from './support/stores.js';
import type { CurlApi } from './support/curl.js';
import { curl } from './support/curl.js';
import { createAuthtoken, type EdgePorts, startEdgeServer } from './support/edge-listeners.js';
import type { BurrowServer } from './support/server-process.js';
import { connectNgrok } from './support/ngrok-agents.js';

/**
 * Host must match SNI on the HTTPS ingress, with curl against a real `burrow server`: the URL's
 * name is the SNI (curl --connect-to sends it to the ingress port), `-H Host:` names another.
 */
describe('HTTPS ingress: Host must match SNI', () => {
  let db: TestDatabase;
  let server: BurrowServer;
  let ports: EdgePorts;
  let caFile: string;
  let web: LocalServer;
  const sessions: ngrok.Session[] = [];

  /** GET https://<sni>/ with `Host: <host>`. */
  const get = (sni: string, host = sni) =>
    curl([
      `https://${sni}:${ports.https}/`,
      '--cacert',
      caFile,
      '--connect-to',
      `${sni}:${ports.https}:127.0.0.1:${ports.https}`,
      '-H',
      `Host: ${host}`,
    ]);

  beforeAll(async () => {
    let api: CurlApi;
    ({ db, ports, server, api, caFile } = await startEdgeServer('sqlite'));
    web = await startHttpUpstream((req, res) => res.end(`host ${req.headers.host ?? ''}`));
    for (const domain of ['app.example.com', '*.sitea.example.com', 'special.sitea.example.com']) {
      expect((await api.post('/reserved_domains', { domain })).status).toBe(201);
    }
    const session = await connectNgrok(
      ports,
      readFileSync(caFile, 'utf8'),
      await createAuthtoken(api),
    );
    sessions.push(session);
    for (const domain of ['app.example.com', '*.sitea.example.com', 'special.sitea.example.com']) {
      await session.httpEndpoint().domain(domain).listenAndForward(`http://127.0.0.1:${web.port}`);
    }
  }, 60_000);
  afterAll(async () => {
    await Promise.all(sessions.map((s) => s.close().catch(() => undefined)));
    await web?.close();
    await server?.stop(20_000);
    await db?.drop();
  });

  it('serves a request whose Host is the SNI', async () => {
    expect(await get('app.example.com')).toMatchObject({
      status: 200,
      text: 'host app.example.com',
    });
  });

  it('answers 421 when Host names another endpoint than the SNI (domain fronting)', async () => {
    const fronted = await get('app.example.com', 'x.sitea.example.com');
    expect(fronted.status).toBe(421);
    expect(fronted.text).toContain('ERR_BURROW_MISDIRECTED_REQUEST');
    expect((await get('a.sitea.example.com', 'app.example.com')).status).toBe(421);
  });

  it('lets a connection made for a wildcard name serve other names of that wildcard endpoint', async () => {
    expect(await get('a.sitea.example.com', 'b.sitea.example.com')).toMatchObject({
      status: 200,
      text: 'host b.sitea.example.com',
    });
  });

  it('does not let it reach a name under the wildcard that is an endpoint of its own', async () => {
    expect((await get('a.sitea.example.com', 'special.sitea.example.com')).status).toBe(421);
    expect(await get('special.sitea.example.com')).toMatchObject({ status: 200 });
  });

  it('ignores case and a port in Host', async () => {
    expect((await get('app.example.com', `APP.example.com:${ports.https}`)).status).toBe(200);
  });
});
