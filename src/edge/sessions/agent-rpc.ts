import type { Logger } from '../../core/logger.js';
import {
  type MessageName,
  type MessageTypes,
  type MuxStream,
  readMessage,
  writeReply,
} from '../../protocol/index.js';
import { AgentError, refusals } from '../binds/agent-errors.js';
import type { EdgeMetrics } from '../metrics/metrics.js';

/** Largest RPC request accepted from an agent (a Bind with a traffic policy fits easily). */
export const MAX_RPC_BYTES = 1024 * 1024;

/** What serving one RPC needs besides the stream. */
export interface RpcServing {
  logger: Logger;
  metrics: EdgeMetrics;
  timeoutMs: number;
  /** Bytes of one request (`--agent-max-rpc-bytes`); default MAX_RPC_BYTES. */
  maxBytes?: number | undefined;
  /** Told of a refusal for going over a limit (metric label), to count and log it per client. */
  refused?: ((limit: string) => void) | undefined;
}

/** The refusal for an unexpected failure: the agent learns nothing internal, the log does. */
function internalError(err: unknown, logger: Logger): AgentError {
  logger.error({ err }, 'agent request failed');
  return new AgentError(
    undefined,
    'The server failed to handle the request; try again later.',
    'internal',
  );
}

/**
 * Serve one agent RPC (docs/protocol.md §5.2): read the request (without waiting for EOF),
 * answer with `handle`'s reply, or with `failure(err)` when reading or handling fails; the reply
 * is always followed by FIN. Refusals are counted by code. Never rejects.
 * @example await serveRpc(stream, 'SrvInfo', serving, async () => ({ Region: 'local' }), (e) => ({ Region: '', Error: e.wireText }));
 */
export async function serveRpc<K extends MessageName>(
  stream: MuxStream,
  name: K,
  serving: RpcServing,
  handle: (request: MessageTypes[K]) => Promise<object>,
  failure: (err: AgentError, request: MessageTypes[K] | undefined) => object,
  maxBytes: number = serving.maxBytes ?? MAX_RPC_BYTES,
): Promise<{ ok: boolean; error?: AgentError }> {
  stream.on('error', () => {
    // A reset stream is the agent's business; the session reports its own failure.
  });
  let request: MessageTypes[K] | undefined;
  try {
    request = await readMessage(stream, name, {
      maxBytes,
      timeoutMs: serving.timeoutMs,
    });
    writeReply(stream, await handle(request));
    return { ok: true };
  } catch (err) {
    // The scanner's RangeError for an object past maxBytes (depth has its own message).
    if (request === undefined && err instanceof RangeError && /longer than/.test(err.message)) {
      serving.refused?.('agent_rpc_bytes');
    }
    const error =
      err instanceof AgentError
        ? err
        : request === undefined
          ? refusals.badRequest(`${name}: ${(err as Error).message}`)
          : internalError(err, serving.logger);
    serving.metrics.agentErrors.with({ code: error.code ?? error.kind }).inc();
    serving.logger.info({ rpc: name, code: error.code, kind: error.kind }, error.message);
    writeReply(stream, failure(error, request));
    return { ok: false, error };
  }
}

/**
 * Refuse a request without reading it: the reply (with FIN) goes out at once and whatever the
 * agent sends is discarded.
 * @example refuseRpc(stream, refusals.notAuthenticated(), serving);
 */
export function refuseRpc(stream: MuxStream, error: AgentError, serving: RpcServing): void {
  stream.on('error', () => {});
  serving.metrics.agentErrors.with({ code: error.code ?? error.kind }).inc();
  writeReply(stream, { Error: error.wireText });
}
