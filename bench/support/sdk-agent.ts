/** The edge of the in-process test server and Burrow SDK agents, as benchmark roles use them. */
import { connect, type Session } from '../../src/sdk/index.js';
import { startSdkTestEdge, type SdkTestEdge } from '../../test/support/sdk-edge.js';
import type { EdgeServer } from '../edge-process.js';

/** What an agent needs to reach an edge, passed to agent roles as JSON. */
export interface EdgeAddress {
  serverAddr: string;
  caFile: string;
  token: string;
}

/**
 * The address of a `burrow server` process (bench/edge-process.ts), with a new authtoken.
 * @example const spec = await edgeAddress(await startEdgeServer());
 */
export async function edgeAddress(
  edge: Pick<EdgeServer, 'agentAddr' | 'caFile' | 'token'>,
): Promise<EdgeAddress> {
  return { serverAddr: edge.agentAddr, caFile: edge.caFile, token: await edge.token() };
}

/** An edge started for a benchmark, with the address agents use and its HTTP ingress port. */
export interface BenchEdge {
  edge: SdkTestEdge;
  info: EdgeAddress & { httpPort: number };
}

/**
 * Start the test edge on SQLite; SIGTERM closes it and exits.
 * @example const { edge, info } = await startBenchEdge();
 */
export async function startBenchEdge(): Promise<BenchEdge> {
  const edge = await startSdkTestEdge('sqlite');
  process.on('SIGTERM', () => void edge.close().then(() => process.exit(0)));
  const info = {
    serverAddr: edge.serverAddr,
    caFile: edge.caFile,
    httpPort: edge.httpPort,
    token: await edge.token(),
  };
  return { edge, info };
}

/**
 * An SDK session to `edge`.
 * @example const session = await connectAgent(spec.edge, { window: 'standard' });
 */
export function connectAgent(
  edge: EdgeAddress,
  options: Omit<Parameters<typeof connect>[0], 'serverAddr' | 'authtoken' | 'ca'> = {},
): Promise<Session> {
  return connect({
    serverAddr: edge.serverAddr,
    authtoken: edge.token,
    ca: edge.caFile,
    ...options,
  });
}
