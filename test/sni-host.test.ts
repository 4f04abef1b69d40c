import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpUpstream, type LocalServer } from '../src/test-support/ingress.js';
import { createTestDatabase, type TestDatabase } from '../src/test-support/stores.js';
import { curl, CurlApi } from './support/curl.js';
import {
  createAuthtoken,
  edgeServerArgs,
  freeEdgePorts,
  type EdgePorts,
} from './support/edge-listeners.js';
import { createApiKey, startBurrowServer, type BurrowServer } from './support/server-process.js';

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
    db = await createTestDatabase('sqlite');
    ports = await freeEdgePorts();
    server = await startBurrowServer(db, { args: edgeServerArgs(ports) });
    const api = new CurlApi(server.url, await createApiKey(db));
    caFile = join(db.dataDir, 'ca.pem');
    web = await startHttpUpstream((req, res) => res.end(`host ${req.headers.host ?? ''}`));
    for (const domain of ['app.example.com', '*.sitea.example.com', 'special.sitea.example.com']) {
      expect((await api.post('/reserved_domains', { domain })).status).toBe(201);
    }
    const session = await new ngrok.SessionBuilder()
      .serverAddr(`127.0.0.1:${ports.agent}`)
      .caCert(Buffer.from(readFileSync(caFile, 'utf8')))
      .authtoken(await createAuthtoken(api))
      .connect();
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
