/**
 * SSH tunnels (issue 32) against `burrow http`: keep-alive requests to one local service through
 * an endpoint made by Debian's OpenSSH client (`ssh -R 0:localhost:<service> … http`, the edge's
 * SSH listener, forwarded-tcpip channels) and through the same service's endpoint of a Burrow SDK
 * agent (what `burrow http` runs), as a ratio. Rounds are interleaved so drift hits both.
 *
 *   node --import tsx bench/ssh-tunnel.ts
 *   DURATION=5 CONNECTIONS=50 ROUNDS=3 node --import tsx bench/ssh-tunnel.ts
 *
 * Processes: the edge (with its SSH listener), the SDK agent and the ssh client (children of the
 * agent role), the local service, one load generator per measurement, and this process.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sshKeygen, startTestSshListener } from '../test/support/ssh.js';
import { machine } from './report.js';
import { compareRoutes, runTunnelBench } from './support/load.js';
import { answer, RoleProcesses } from './support/roles.js';
import { connectAgent, startBenchEdge, type EdgeAddress } from './support/sdk-agent.js';

const DURATION = Number(process.env.DURATION ?? 5);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

type EdgeInfo = EdgeAddress & { httpPort: number; sshPort: number; key: string };

async function serveEdge(): Promise<void> {
  const { edge, info } = await startBenchEdge();
  const ssh = await startTestSshListener(edge);
  const key = sshKeygen(mkdtempSync(join(tmpdir(), 'burrow-bench-ssh-')), 'key', 'ed25519');
  await edge.repos.sshCredentials.create({ public_key: key.line });
  answer({ ...info, sshPort: Number(ssh.address.split(':').pop()), key: key.path });
}

/** `ssh -R` in batch mode; resolves with the host of the URL it prints. */
function sshTunnel(edge: EdgeInfo, service: number): Promise<string> {
  const child = spawn(
    'ssh',
    [
      ...['-p', String(edge.sshPort), '-i', edge.key, '-R', `0:127.0.0.1:${service}`],
      ...['-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=no'],
      ...['-o', 'UserKnownHostsFile=/dev/null', '-o', 'LogLevel=error'],
      ...['127.0.0.1', 'http'],
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  process.on('exit', () => child.kill());
  return new Promise((resolve, reject) => {
    let out = '';
    // Until the URL: then the request log flows on, unread (the stream keeps flowing).
    const read = (d: string): void => {
      out += d;
      const m = /Forwarding (\S+)/.exec(out);
      if (!m) return;
      child.stdout.off('data', read);
      resolve(new URL(m[1]!).hostname);
    };
    child.stdout.setEncoding('utf8').on('data', read);
    child.once('exit', (code) => reject(new Error(`ssh exited with ${code}: ${out}`)));
  });
}

async function serveAgent(spec: { edge: EdgeInfo; service: number }): Promise<void> {
  const session = await connectAgent(spec.edge);
  const direct = await session.httpEndpoint({ scheme: 'http', forward: spec.service });
  answer([new URL(direct.url!).hostname, await sshTunnel(spec.edge, spec.service)]);
}

const roles = new RoleProcesses(import.meta.url);

async function main(): Promise<void> {
  const edge = await roles.start<EdgeInfo>('edge');
  const service = await roles.start<{ http: number }>('service');
  const hosts = await roles.start<string[]>('agent', { edge, service: service.http });
  const names = ['burrow http (SDK agent)', 'ssh -R … http (OpenSSH client)'];
  const table = await compareRoutes(roles, {
    port: edge.httpPort,
    hosts,
    names,
    rounds: ROUNDS,
  });
  console.log(
    `\nSSH tunnel against burrow http, ${machine()}; ${CONNECTIONS} keep-alive connections, ` +
      `${DURATION} s per run, median of ${ROUNDS} interleaved rounds.\n`,
  );
  console.log(table);
  for (const child of roles.children) child.kill('SIGTERM');
}

runTunnelBench(roles, { main, serveEdge, serveAgent, connections: CONNECTIONS, seconds: DURATION });
