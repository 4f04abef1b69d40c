/**
 * Issue 20: requests per second through an endpoint whose policy checks a JWT (`jwt-validation`)
 * and through one whose policy holds a signed-in OpenID Connect session (`openid-connect`), as
 * ratios of the same endpoint without a policy, in the same run. Public client -> edge ingress ->
 * agent session -> Burrow SDK -> local service; one agent, three endpoints on the same service:
 *
 * 1. no policy;
 * 2. `jwt-validation`: every request carries `Authorization: Bearer <token>` (ALG, RS256 by
 *    default, 2048-bit key), checked against a JWKS served by this process over local HTTP (the
 *    edge fetches it once and caches it; the number of fetches is printed);
 * 3. `openid-connect` against a local oidc-provider: one scripted login before measuring, then
 *    every request carries the session cookie it yielded;
 * 4. and 5. POSTs of a 1 KiB body, without a policy and through `verify-webhook` (provider `hmac`,
 *    SHA-256): the edge reads each body whole, checks its signature, then relays it (issue 28:
 *    on the lean relay since the fifth session of 2026-11-28).
 *
 *   RUNS=3 DURATION=5 npm run bench:auth
 *   RUNS=5 DURATION=5 CONNECTIONS=50 ALG=ES256 npm run bench:auth
 *   PROFILE=/tmp/auth-prof RUNS=1 npm run bench:auth   # + a V8 CPU profile of the edge (whole run)
 *
 * Before measuring, the benchmark checks that the checks are real: the JWT endpoint answers 401
 * without a token and with a wrongly signed one, 200 with the token; the OIDC endpoint redirects
 * (302) to the provider without the cookie and answers 200 with it. Then RUNS interleaved rounds
 * (the order rotates each round) of DURATION seconds of autocannon with CONNECTIONS keep-alive
 * connections, in a child process. Edge, agent, service and load generator are separate
 * processes; the JWKS server and the identity provider live in this coordinating process, which
 * is idle while a round runs (neither is asked anything then). The edge's CPU time per request
 * comes from /proc/<pid>/stat around each run.
 */
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import {
  configureEgress,
  parseEgressAllow,
  type EgressAllowEntry,
} from '../src/core/egress-guard.js';
import { LoginClient } from '../test/support/login-client.js';
import { processCpuMs } from './edge-process.js';
import { fmt, machine, markdownTable } from './report.js';
import { startBulkService } from './support/bulk.js';
import { keepAliveLoadRole, median, type RateResult } from './support/load.js';
import { answer, RoleProcesses, runRoles } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const RUNS = Number(process.env.RUNS ?? process.env.ROUNDS ?? 3);
const ALG = process.env.ALG ?? 'RS256';
/** A folder for the edge's `--cpu-prof` profile (written when it exits), or unset. */
const PROFILE = process.env.PROFILE;

const ISSUER = 'https://id.burrow-bench.test/';
const AUDIENCE = 'bench-api';
/** The OIDC endpoint needs a name known before it exists: the provider's redirect URI holds it. */
const OIDC_HOST = 'oidc-bench.burrow.test';

const CASES = [
  'no policy',
  'jwt-validation',
  'openid-connect (signed in)',
  'no policy, POST 1 KiB',
  'verify-webhook, POST 1 KiB',
] as const;
/** Each case's baseline: the GET cases against GET without a policy, the POSTs against POST. */
const BASE: readonly number[] = [0, 0, 0, 3, 3];
const WEBHOOK_SECRET = 'bench-webhook-secret';
const WEBHOOK_BODY = JSON.stringify({ event: 'push', pad: 'x'.repeat(1000) });

type EdgeInfo = EdgeAddress & { httpPort: number };
interface AgentSpec {
  edge: EdgeInfo;
  service: number;
  jwtPolicy: object;
  oidcPolicy: object;
}
interface LoadSpec {
  port: number;
  host: string;
  headers: Record<string, string>;
  method?: 'GET' | 'POST';
  body?: string;
  warmup?: boolean;
}
interface Measured extends RateResult {
  /** Edge CPU time per request, microseconds. */
  cpuUs: number;
}

// ---- children ----------------------------------------------------------------------------

async function serveAgent(spec: AgentSpec): Promise<void> {
  const session = await connectAgent(spec.edge);
  const endpoints = [
    await session.httpEndpoint({ scheme: 'http', forward: spec.service }),
    await session.httpEndpoint({
      scheme: 'http',
      forward: spec.service,
      trafficPolicy: spec.jwtPolicy,
    }),
    await session.httpEndpoint({
      scheme: 'http',
      domain: OIDC_HOST,
      forward: spec.service,
      trafficPolicy: spec.oidcPolicy,
    }),
    await session.httpEndpoint({
      scheme: 'http',
      forward: spec.service,
      trafficPolicy: {
        on_http_request: [
          {
            actions: [
              {
                type: 'verify-webhook',
                config: {
                  provider: 'hmac',
                  secret: WEBHOOK_SECRET,
                  header: 'X-Signature',
                  algorithm: 'sha256',
                  encoding: 'hex',
                },
              },
            ],
          },
        ],
      },
    }),
  ];
  answer(endpoints.map((e) => new URL(e.url!).hostname));
}

// ---- coordination ------------------------------------------------------------------------

const roles = new RoleProcesses(import.meta.url);

/** A JWKS at `/jwks.json` on loopback, counting how often it is fetched. */
async function startJwks(
  keys: object[],
): Promise<{ url: string; fetches: () => number; server: Server }> {
  let fetches = 0;
  const server = createServer((req, res) => {
    if (req.url !== '/jwks.json') return void res.writeHead(404).end();
    fetches++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys }));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/jwks.json`, fetches: () => fetches, server };
}

/** One GET (or a POST of `body`) of `/` through the edge with `Host: host`: status and Location. */
function probe(
  port: number,
  host: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; location: string }> {
  return new Promise((resolve, reject) => {
    const method = body === undefined ? 'GET' : 'POST';
    const req = request(
      { host: '127.0.0.1', port, path: '/', method, agent: false, headers: { host, ...headers } },
      (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, location: String(res.headers.location ?? '') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function expectStatus(what: string, got: number, want: number): void {
  if (got !== want) throw new Error(`${what}: expected ${want}, got ${got}`);
  process.stderr.write(`check: ${what} -> ${got}\n`);
}

async function main(): Promise<void> {
  const { reply: edge, proc: edgeProc } = await roles.spawn<EdgeInfo>('edge', undefined, {
    nodeArgs: PROFILE ? ['--cpu-prof', '--cpu-prof-dir', PROFILE] : [],
  });
  const service = await roles.start<{ http: number }>('service');

  // JWT: a key pair, its public half in a local JWKS, one token valid for the whole run.
  const key = await generateKeyPair(ALG);
  const stranger = await generateKeyPair(ALG);
  const jwks = await startJwks([
    { ...(await exportJWK(key.publicKey)), kid: 'bench-1', alg: ALG, use: 'sig' },
  ]);
  const sign = (privateKey: typeof key.privateKey) =>
    new SignJWT({ sub: 'alice', email: 'alice@example.com' })
      .setProtectedHeader({ alg: ALG, kid: 'bench-1' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setIssuedAt()
      .setExpirationTime('2h')
      .sign(privateKey);
  const token = await sign(key.privateKey);
  const forged = await sign(stranger.privateKey);
  const jwtPolicy = {
    on_http_request: [
      {
        actions: [
          {
            type: 'jwt-validation',
            config: {
              issuer: { allow_list: [{ value: ISSUER }] },
              audience: { allow_list: [{ value: AUDIENCE }] },
              http: {
                tokens: [
                  { type: 'jwt', method: 'header', name: 'Authorization', prefix: 'Bearer ' },
                ],
              },
              jws: {
                allowed_algorithms: [ALG],
                keys: { sources: { additional_jkus: [jwks.url] } },
              },
            },
          },
        ],
      },
    ],
  };

  // OIDC: a local provider whose client may come back to the OIDC endpoint's callback.
  const origin = `http://${OIDC_HOST}:${edge.httpPort}`;
  // Imported here, not at the top: every child role loads this script, and only this process needs it.
  const { startTestIdp } = await import('../test/support/oidc-idp.js');
  const idp = await startTestIdp({ redirectUris: [`${origin}/ngrok/callback`] });
  const oidcPolicy = { on_http_request: [{ actions: [idp.action()] }] };

  const hosts = await roles.start<string[]>('agent', {
    edge,
    service: service.http,
    jwtPolicy,
    oidcPolicy,
  } satisfies AgentSpec);
  const [noneHost, jwtHost, oidcHost, webhookHost] = hosts as [string, string, string, string];

  // The checks are real: refused without credentials, let through with them.
  const port = edge.httpPort;
  expectStatus('no policy', (await probe(port, noneHost)).status, 200);
  expectStatus('jwt without a token', (await probe(port, jwtHost)).status, 401);
  const forgedStatus = (await probe(port, jwtHost, { authorization: `Bearer ${forged}` })).status;
  expectStatus('jwt signed by another key', forgedStatus, 401);
  const jwtHeaders = { authorization: `Bearer ${token}` };
  expectStatus('jwt with the token', (await probe(port, jwtHost, jwtHeaders)).status, 200);
  const anonymous = await probe(port, oidcHost);
  expectStatus('oidc without a cookie', anonymous.status, 302);
  if (!anonymous.location.startsWith(idp.issuer)) {
    throw new Error(`oidc redirected to ${anonymous.location}, not to ${idp.issuer}`);
  }
  const browser = new LoginClient((u) => (u.hostname === OIDC_HOST ? { port } : undefined));
  const hops = await browser.login(`${origin}/`, 'alice');
  expectStatus('oidc login, last hop', hops.at(-1)!.status, 200);
  const cookie = browser.cookies(OIDC_HOST).get('burrow_oidc');
  if (!cookie) throw new Error('the login set no burrow_oidc cookie');
  const oidcHeaders = { cookie: `burrow_oidc=${cookie}` };
  expectStatus('oidc with the cookie', (await probe(port, oidcHost, oidcHeaders)).status, 200);

  const signature = createHmac('sha256', WEBHOOK_SECRET).update(WEBHOOK_BODY).digest('hex');
  const signed = { 'x-signature': signature, 'content-type': 'application/json' };
  const badSignature = { ...signed, 'x-signature': '00'.repeat(32) };
  expectStatus(
    'webhook, forged',
    (await probe(port, webhookHost, badSignature, WEBHOOK_BODY)).status,
    403,
  );
  expectStatus(
    'webhook, signed',
    (await probe(port, webhookHost, signed, WEBHOOK_BODY)).status,
    200,
  );

  const post = { method: 'POST', body: WEBHOOK_BODY } as const;
  const loads: LoadSpec[] = [
    { port, host: noneHost, headers: {} },
    { port, host: jwtHost, headers: jwtHeaders },
    { port, host: oidcHost, headers: oidcHeaders },
    { port, host: noneHost, headers: { 'content-type': 'application/json' }, ...post },
    { port, host: webhookHost, headers: signed, ...post },
  ];
  const measure = async (spec: LoadSpec): Promise<Measured> => {
    const before = processCpuMs(edgeProc.pid!);
    const load = await roles.start<RateResult>('load', spec);
    const after = processCpuMs(edgeProc.pid!);
    return { ...load, cpuUs: ((after - before) * 1000) / Math.max(1, load.total) };
  };

  // Warm up each endpoint (JIT, the agent's stream pool) before measuring.
  for (const spec of loads) await roles.start<RateResult>('load', { ...spec, warmup: true });
  const results = CASES.map(() => [] as Measured[]);
  for (let round = 0; round < RUNS; round++) {
    for (let k = 0; k < CASES.length; k++) {
      const i = (round + k) % CASES.length;
      results[i]![round] = await measure(loads[i]!);
      const r = results[i]![round]!;
      process.stderr.write(
        `round ${round + 1}: ${CASES[i]} ${fmt(r.rate)} req/s, ${fmt(r.cpuUs, 1)} µs/req\n`,
      );
    }
  }

  const rows = CASES.map((name, i) => {
    const rs = results[i]!;
    const base = median(results[BASE[i]!]!.map((r) => r.rate));
    const baseCpu = median(results[BASE[i]!]!.map((r) => r.cpuUs));
    const rps = median(rs.map((r) => r.rate));
    const cpuUs = median(rs.map((r) => r.cpuUs));
    return [
      name,
      fmt(rps),
      fmt(rps / base, 2),
      `${fmt(median(rs.map((r) => r.p50)), 1)} / ${fmt(median(rs.map((r) => r.p99)), 1)}`,
      `${fmt(cpuUs, 1)} (${BASE[i]! === i ? '-' : `+${fmt(cpuUs - baseCpu, 1)}`})`,
      String(rs.reduce((n, r) => n + r.errors, 0)),
    ];
  });
  const ratioRow = (i: number): string[] => {
    const base = results[BASE[i]!]!;
    const perRound = results[i]!.map((r, round) => r.rate / base[round]!.rate);
    const cpuPerRound = results[i]!.map((r, round) => r.cpuUs - base[round]!.cpuUs);
    return [
      `${['', 'jwt', 'oidc', '', 'verify-webhook'][i]} / none`,
      perRound.map((x) => fmt(x, 2)).join(', '),
      `**${fmt(median(perRound), 2)}**`,
      fmt(median(cpuPerRound), 1),
    ];
  };

  console.log(
    `\nAuth policies through a tunnel, ${machine()}; JWT ${ALG}; ` +
      `${CONNECTIONS} keep-alive connections, ${DURATION} s per run, median of ${RUNS} interleaved rounds.\n`,
  );
  console.log(
    markdownTable(
      ['endpoint', 'req/s', 'vs none', 'p50 / p99 ms', 'edge CPU µs/req (+ vs none)', 'errors'],
      rows,
    ),
  );
  console.log('');
  console.log(
    markdownTable(
      ['ratio of req/s', 'per round', 'median of rounds', 'edge CPU µs/req added (median)'],
      [ratioRow(1), ratioRow(2), ratioRow(4)],
    ),
  );
  console.log(`\nJWKS fetched ${jwks.fetches()} time(s) by the edge during the whole run.`);
  jwks.server.close();
  await idp.close();
  if (PROFILE) {
    // The profile is written when the edge exits: stop it here and wait, rather than leave it to
    // the kill at the end of main.
    edgeProc.kill('SIGTERM');
    await once(edgeProc, 'exit');
    console.log(
      `Edge CPU profile in ${PROFILE} (summary: node --import tsx bench/cpu-profile.ts <file>).`,
    );
  }
}

runRoles(roles, {
  main,
  edge: () => {
    // The JWKS and the identity provider listen on loopback, which the egress guard refuses
    // unless allowed (as `--egress-allow 127.0.0.1` would).
    configureEgress({ allow: [parseEgressAllow('127.0.0.1') as EgressAllowEntry] });
    return startBenchEdge().then(({ info }) => answer(info));
  },
  service: () => startBulkService().then(answer),
  agent: (arg) => serveAgent(arg as AgentSpec),
  load: keepAliveLoadRole(CONNECTIONS, DURATION),
});
