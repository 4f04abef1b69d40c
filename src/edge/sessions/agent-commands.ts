import { BurrowError, CODES } from '../../core/errors.js';
import { type MuxSession, RpcError, StreamType, call } from '../../protocol/index.js';

/**
 * Why a remote command (Restart, Stop) did not reach or was refused by the agent. An API error:
 * 400 when the agent does not support the command, 502 when it failed or did not answer.
 */
export class AgentCommandError extends BurrowError {
  constructor(code: string, statusCode: number, message: string) {
    super(code, statusCode, message);
  }
}

/**
 * Send Restart or Stop (server-opened streams 4 and 5) and wait for the agent's answer. Only agents
 * that advertised support in Auth (`RestartUnsupportedError` / `StopUnsupportedError` === "") are
 * asked. A session that closes before answering counts as done: stopping and restarting agents
 * hang up.
 * @example await runCommand(session.mux, 'stop', auth.stopUnsupported, 10_000);
 */
export async function runCommand(
  mux: MuxSession,
  command: 'restart' | 'stop',
  unsupported: string | null | undefined,
  timeoutMs: number,
): Promise<void> {
  if (unsupported !== '') {
    const reason =
      typeof unsupported === 'string'
        ? unsupported
        : 'the agent did not say it supports remote commands (it is too old, or not authenticated)';
    throw new AgentCommandError(
      command === 'stop' ? CODES.agentStopUnsupported : CODES.agentRestartUnsupported,
      400,
      `This agent does not support remote ${command === 'stop' ? 'stopping' : 'restarting'}: ${reason}.`,
    );
  }
  if (mux.closed) return;
  const type = command === 'stop' ? StreamType.Stop : StreamType.Restart;
  try {
    await call(mux, type, {}, { timeoutMs });
  } catch (err) {
    if (err instanceof RpcError) {
      throw new AgentCommandError(
        CODES.agentCommandFailed,
        502,
        `The agent failed to ${command} because of an error: ${err.message}`,
      );
    }
    if (mux.closed) return;
    throw new AgentCommandError(
      CODES.agentUnreachable,
      502,
      `The ${command} command could not be delivered to the agent or its answer was lost (${(err as Error).message}). The agent may be shutting down or reconnecting.`,
    );
  }
}
