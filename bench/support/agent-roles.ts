/**
 * The agent roles of the benches that publish one HTTP endpoint on the bulk service
 * (keepalive-ab.ts, download-loop.ts): Burrow's SDK or the unmodified `@ngrok/ngrok`, each
 * answering its process id (for its CPU time) and the endpoint's URL.
 */
import type { ServicePorts } from './bulk.js';
import { connectNgrok } from './ngrok-agent.js';
import { answer } from './roles.js';
import { connectAgent, type EdgeAddress } from './sdk-agent.js';

/** What an agent role is started with: the edge to connect to, the service to forward to. */
export interface AgentSpec extends EdgeAddress {
  service: ServicePorts;
}

/**
 * Burrow's SDK as the agent.
 * @example if (role === 'sdk') await serveSdk(spec);
 */
export async function serveSdk(spec: AgentSpec): Promise<void> {
  const session = await connectAgent(spec);
  const web = await session.httpEndpoint({ scheme: 'http', forward: spec.service.http });
  answer({ pid: process.pid, http: web.url });
}

/**
 * `@ngrok/ngrok` as the agent.
 * @example if (role === 'ngrok') await serveNgrok(spec);
 */
export async function serveNgrok(spec: AgentSpec): Promise<void> {
  const session = await connectNgrok(spec);
  const web = await session
    .httpEndpoint()
    .scheme('HTTP')
    .listenAndForward(`http://127.0.0.1:${spec.service.http}`);
  // ngrok's native session holds no handle on Node's event loop; keep the process alive.
  setInterval(() => undefined, 60_000);
  answer({ pid: process.pid, http: web.url() });
}
