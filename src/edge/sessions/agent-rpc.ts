import { CODES } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import {
  agentFieldProblem,
  BudgetExceededError,
  BudgetHold,
  ByteBudget,
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
  /**
   * A hold on the session's (credential's, process's) budget of bytes that requests being read
   * may keep at once, one per request: each request is within maxBytes, their sum within this.
   */
  budget?: (() => BudgetHold) | undefined;
}

/** The refusal of a request that would take its session, credential or process past its budget. */
function overBudget(err: BudgetExceededError): AgentError {
  return new AgentError(
    CODES.agentRpcBytes,
    `The request was refused: ${err.message}. Send fewer requests at once, or finish each one; then retry.`,
  );
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
  const hold = serving.budget?.();
  try {
    const read = await readMessage(stream, name, {
      maxBytes,
      timeoutMs: serving.timeoutMs,
      budget: hold,
    });
    // One table of limits for every message (field-limits.ts); the refusal echoes nothing back.
    const problem = agentFieldProblem(name, read);
    if (problem) {
      serving.refused?.('agent_field_bytes');
      throw refusals.badRequest(problem);
    }
    request = read;
    writeReply(stream, await handle(request));
    return { ok: true };
  } catch (err) {
    // The scanner's RangeError for an object past maxBytes (depth has its own message).
    if (request === undefined && err instanceof RangeError && /longer than/.test(err.message)) {
      serving.refused?.('agent_rpc_bytes');
    }
    if (err instanceof BudgetExceededError) serving.refused?.(err.budget.name);
    const error =
      err instanceof AgentError
        ? err
        : err instanceof BudgetExceededError
          ? overBudget(err)
          : request === undefined
            ? refusals.badRequest(`${name}: ${(err as Error).message}`)
            : internalError(err, serving.logger);
    serving.metrics.agentErrors.with({ code: error.code ?? error.kind }).inc();
    serving.logger.info({ rpc: name, code: error.code, kind: error.kind }, error.message);
    writeReply(stream, failure(error, request));
    return { ok: false, error };
  } finally {
    hold?.release();
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

/** The bytes agent requests may hold at once while being read and served, at each level. */
export interface RpcByteLimits {
  perSession: number;
  perCredential: number;
  perProcess: number;
}

/**
 * The budgets of agent requests in progress (serveRpc): each session's, each credential's (shared
 * by its sessions) and the listener's. A request is refused (ERR_BURROW_AGENT_RPC_BYTES) when
 * reading it would take any of them past its limit; the others go on.
 * @example
 * const budgets = new RpcBudgets(limits, metrics.rpcPendingBytes.with());
 * const session = budgets.session(); budgets.join('cr_1'); … serving.budget = () => session.hold('cr_1');
 */
export class RpcBudgets {
  private readonly process: ByteBudget;
  private readonly credentials = new Map<string, { budget: ByteBudget; sessions: number }>();

  constructor(
    private readonly limits: RpcByteLimits,
    gauge?: { inc(by: number): void },
  ) {
    this.process = new ByteBudget('agent_rpc_bytes_per_process', limits.perProcess, (delta) =>
      gauge?.inc(delta),
    );
  }

  /** A credential's sessions share its budget from the first Auth to the last session's end. */
  join(credentialId: string): void {
    const entry = this.credentials.get(credentialId);
    if (entry) entry.sessions++;
    else {
      const budget = new ByteBudget('agent_rpc_bytes_per_credential', this.limits.perCredential);
      this.credentials.set(credentialId, { budget, sessions: 1 });
    }
  }

  leave(credentialId: string): void {
    const entry = this.credentials.get(credentialId);
    if (entry && --entry.sessions === 0) this.credentials.delete(credentialId);
  }

  /** A new session's own budget; `hold(credentialId)` takes from it, its credential's and ours. */
  session(): { hold(credentialId: string | undefined): BudgetHold } {
    const own = new ByteBudget('agent_rpc_bytes_per_session', this.limits.perSession);
    return {
      hold: (credentialId) => {
        const credential = credentialId ? this.credentials.get(credentialId)?.budget : undefined;
        return new BudgetHold(credential ? [own, credential, this.process] : [own, this.process]);
      },
    };
  }
}
