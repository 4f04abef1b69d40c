import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpUpstream, type LocalServer } from '../../test/support/ingress.js';
import { until } from '../../test/support/mux.js';
import { startSdkTestEdge, type SdkTestEdge } from '../../test/support/sdk-edge.js';
import { startAgent, type AgentOptions, type RunningAgent } from './agent.js';
import { AgentApiError } from './errors.js';
import { parseState, StateFileError, type StoredTunnel } from './state-file.js';
import { parseLabels, parseTunnelRequest } from './tunnel-input.js';
import { findTunnelKey, labelsKey, tunnelKey } from './tunnel-keys.js';

/**
 * The device agent's labeled tunnels: the `labels` of `POST /tunnels` checked field by field,
 * what names them (url_part) and the state file; then the API over a real socket against an
 * in-process edge, through create, refusal, duplicate, restart and delete. Real traffic through
 * TCP and TLS edges, with real processes, is test/device-agent-labels.test.ts.
 */

function refusal(fn: () => unknown): AgentApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AgentApiError);
    return err as AgentApiError;
  }
  throw new Error('expected a refusal');
}

describe('labels in POST /tunnels', () => {
  it('takes an object, as the API shows labels, or a list of key=value, as --label writes them', () => {
    const object = { forwards_to: ':8001', labels: { app: 'web', site: 'a' } };
    expect(parseTunnelRequest(object)).toEqual({
      protocol: 'labeled',
      forwards_to: ':8001',
      target: 'localhost:8001',
      labels: { app: 'web', site: 'a' },
    });
    expect(
      parseTunnelRequest({ protocol: 'labeled', forwards_to: ':8001', labels: ['app = web'] }),
    ).toMatchObject({ protocol: 'labeled', labels: { app: 'web' } });
    expect(parseLabels({ 'k8s.ngrok.com/service': 'a:b' })).toEqual({
      'k8s.ngrok.com/service': 'a:b',
    });
    // fromEntries keeps even this key a label, not the object's prototype.
    expect(Object.keys(parseLabels(JSON.parse('{"__proto__": "x"}')))).toEqual(['__proto__']);
  });

  it.each([
    [{ labels: { app: 'web' }, domain: 'a.example.com' }, 'domain', /drop domain, or drop labels/],
    [{ labels: { app: 'web' }, policy: {} }, 'policy', /no address, policy or endpoint options/],
    [{ labels: { app: 'web' }, basic_auth: ['a:bcdefghij'] }, 'basic_auth', /drop basic_auth/],
    [{ labels: { app: 'web' }, protocol: 'tcp' }, 'protocol', /no protocol of its own/],
    [{ labels: {} }, 'labels', /1 to 10 labels \(got 0\)/],
    [{ labels: 'app=web' }, 'labels', /an object of labels like/],
    [{ labels: ['app'] }, 'labels[0]', /"key=value"/],
    [{ labels: ['app=a', 'app=b'] }, 'labels[1]', /the key 'app' appears twice/],
    [{ labels: { app: 'a=b' } }, 'labels.app', /must not contain '='/],
    [{ labels: { 'a b': 'c' } }, 'labels.a b', /may contain only the characters/],
    [{ labels: { app: 7 } }, 'labels.app', /must be a string/],
    [{ protocol: 'labeled' }, 'labels', /required with protocol "labeled"/],
  ])('refuses %j naming %s', (fields, field, message) => {
    const err = refusal(() => parseTunnelRequest({ forwards_to: ':8001', ...fields }));
    expect(err.status).toBe(400);
    expect(err.body()).toMatchObject({ code: 'ERR_NGROK_215', field });
    expect(err.message).toMatch(message);
  });

  it('refuses more than 10 labels, as the server would', () => {
    const labels = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`k${i}`, 'v']));
    expect(refusal(() => parseLabels(labels)).message).toMatch(/1 to 10 labels \(got 11\)/);
  });
});

describe('what names a labeled tunnel, and its record in the state file', () => {
  const labeled: StoredTunnel = {
    protocol: 'labeled',
    labels: { site: 'a', app: 'web' },
    forwards_to: ':8001',
    created_at: '2026-11-28T12:00:00.000Z',
  };

  it('is its labels sorted by key, found in any order', () => {
    expect(labelsKey({ site: 'a', app: 'web' })).toBe('app=web,site=a');
    expect(tunnelKey(labeled)).toBe('app=web,site=a');
    const records = new Map([[tunnelKey(labeled), labeled]]);
    expect(findTunnelKey(records, 'site=a,app=web')).toBe('app=web,site=a');
    expect(findTunnelKey(records, 'labels app=web,site=a')).toBe('app=web,site=a');
    expect(findTunnelKey(records, 'site=a')).toBeUndefined();
    expect(findTunnelKey(records, 'device1.example.com')).toBeUndefined();
  });

  it('reads back as written; a bad or repeated one stops the agent naming it', () => {
    const text = (tunnels: unknown[]) => JSON.stringify({ version: 1, tunnels });
    expect(parseState(text([labeled]), 'tunnels.json')).toEqual([labeled]);
    const bad = () => parseState(text([{ ...labeled, labels: { app: 'a=b' } }]), 'tunnels.json');
    expect(bad).toThrow(StateFileError);
    expect(bad).toThrow(/is corrupt: tunnels\[0\]\.labels\.app: label value "a=b"/);
    const twice = () =>
      parseState(text([labeled, { ...labeled, labels: { app: 'web', site: 'a' } }]), 'x.json');
    expect(twice).toThrow(/the url_part app=web,site=a appears twice/);
    const noTarget = () => parseState(text([{ ...labeled, forwards_to: '' }]), 'x.json');
    expect(noTarget).toThrow(/tunnels\[0\]\.forwards_to must be a non-empty string/);
  });
});

describe('labeled tunnels through the agent API, against an in-process edge', () => {
  let edge: SdkTestEdge;
  let echo: LocalServer;
  let dir: string;
  let token: string;
  const agents: RunningAgent[] = [];

  beforeAll(async () => {
    edge = await startSdkTestEdge('sqlite');
    // The device may bind labels whose key is its site, any value: services of its own.
    token = await edge.token({ acl: ['bind:sitea=*', 'bind:zone=*'] });
    echo = await startTcpUpstream((socket) => socket.pipe(socket));
    dir = mkdtempSync(join(tmpdir(), 'burrow-agent-labels-'));
  });
  afterAll(async () => {
    for (const agent of agents) await agent.close();
    await echo?.close();
    await edge?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = async (): Promise<RunningAgent> => {
    const options: AgentOptions = {
      serverAddr: edge.serverAddr,
      authtoken: token,
      ca: edge.caFile,
      listen: '127.0.0.1:0',
      statePath: join(dir, 'tunnels.json'),
      defaultPolicyPath: join(dir, 'test.json'),
      defaultPolicyExplicit: false,
      expose: undefined,
      apiToken: undefined,
      retry: { initialDelay: 50, maxDelay: 500 },
      webAddr: '127.0.0.1:0',
    };
    const agent = await startAgent(options, pino({ level: 'silent' }));
    agents.push(agent);
    await once(agent.tunnels, 'online');
    return agent;
  };
  const call = async (agent: RunningAgent, method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://${agent.address}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
  };
  const onEdge = () =>
    edge.registry
      .listTunnels()
      .filter((t) => t.labels !== undefined)
      .map((t) => ({ labels: t.labels, forwardsTo: t.forwardsTo }));

  it('creates, lists, refuses a second, comes back after a restart, and deletes by its labels', async () => {
    let agent = await start();
    const view = {
      url: null,
      url_part: 'sitea=web,zone=1',
      protocol: 'labeled',
      forwards_to: `127.0.0.1:${echo.port}`,
      domain: null,
      labels: { sitea: 'web', zone: '1' },
      policy: null,
    };
    const created = await call(agent, 'POST', '/tunnels', {
      forwards_to: `127.0.0.1:${echo.port}`,
      labels: { zone: '1', sitea: 'web' },
    });
    expect(created).toEqual({
      status: 200,
      body: { ...view, labels: { zone: '1', sitea: 'web' } },
    });
    expect(onEdge()).toEqual([
      { labels: { zone: '1', sitea: 'web' }, forwardsTo: `127.0.0.1:${echo.port}` },
    ]);
    const state = JSON.parse(readFileSync(join(dir, 'tunnels.json'), 'utf8')) as {
      tunnels: unknown[];
    };
    expect(state.tunnels).toEqual([
      {
        protocol: 'labeled',
        labels: { zone: '1', sitea: 'web' },
        forwards_to: `127.0.0.1:${echo.port}`,
        created_at: expect.any(String) as string,
      },
    ]);

    // The same labels in the list form and another order are the same tunnel.
    const again = await call(agent, 'POST', '/tunnels', {
      forwards_to: ':1',
      labels: ['sitea=web', 'zone=1'],
    });
    expect(again).toMatchObject({ status: 409, body: { field: 'labels' } });
    expect((again.body as { error: string }).error).toContain(
      'DELETE /tunnels/sitea%3Dweb%2Czone%3D1',
    );
    // A label outside the token's ACL is the server's refusal, named on the field; nothing kept.
    const outside = await call(agent, 'POST', '/tunnels', {
      forwards_to: ':1',
      labels: { siteb: 'web' },
    });
    expect(outside).toMatchObject({
      status: 403,
      body: { code: 'ERR_NGROK_399', field: 'labels' },
    });
    expect((outside.body as { error: string }).error).toMatch(
      /^the server refused the tunnel on labels siteb=web: /,
    );
    // The inspector's agent API (--web-addr) names it by its labels too.
    const inspected = (await (await fetch(`http://${agent.webAddress}/api/tunnels`)).json()) as {
      tunnels: unknown[];
    };
    expect(inspected.tunnels).toMatchObject([
      {
        name: 'sitea=web,zone=1',
        public_url: 'labels:zone=1,sitea=web',
        proto: 'labeled',
        config: { addr: `127.0.0.1:${echo.port}`, labels: ['zone=1', 'sitea=web'] },
      },
    ]);
    const listed = await call(agent, 'GET', '/tunnels');
    expect(listed.body).toEqual([{ ...view, labels: { zone: '1', sitea: 'web' } }]);

    await agent.close();
    await until(() => onEdge().length === 0, 5000);
    agent = await start();
    expect((await call(agent, 'GET', '/tunnels')).body).toEqual(listed.body);
    await until(() => onEdge().length === 1, 5000);

    const path = `/tunnels/${encodeURIComponent('zone=1,sitea=web')}`;
    expect(await call(agent, 'DELETE', path)).toEqual({ status: 204, body: undefined });
    expect(onEdge()).toEqual([]);
    expect((await call(agent, 'GET', '/tunnels')).body).toEqual([]);
    expect((await call(agent, 'DELETE', path)).status).toBe(404);
  });
});
