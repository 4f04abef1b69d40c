import { coalesced } from '../../core/coalesced.js';
import type { Logger } from '../../core/logger.js';
import type { Repositories } from '../../store/index.js';
import { refusals, type AgentError } from '../binds/agent-errors.js';
import type { EdgeMetrics } from '../metrics/metrics.js';

/** A live session as revocation sees it: the credential it authenticated with, and a way out. */
export interface RevocableSession {
  readonly id: string;
  /** '' until the session authenticated. */
  readonly credentialId: string;
  readonly gone: boolean;
  /** Take its endpoints offline at once and close it with `error` (code in the GOAWAY text). */
  revoke(error: AgentError): void;
}

export interface RevocationOptions {
  repos: Repositories;
  /** The sessions to check (every live session of the agent listener). */
  sessions: () => Iterable<RevocableSession>;
  logger: Logger;
  metrics?: EdgeMetrics | undefined;
  /** How often the store is asked (`--revocation-check-ms`); 0 turns the periodic check off. */
  intervalMs: number;
  /**
   * Sessions of another kind of credential (SSH keys, src/edge/ssh): how the store answers for
   * them (default: authtokens' `credentials.standing`) and what a revoked one is told.
   */
  credentials?: {
    standing: (ids: readonly string[]) => Promise<Map<string, 'ok' | 'inactive'>>;
    refusalFor: (credentialId: string, standing: 'inactive' | undefined) => AgentError;
  };
}

/** Why a credential no longer serves agents, as the refusal the agent sees. */
function refusalFor(credentialId: string, standing: 'inactive' | undefined): AgentError {
  return standing === 'inactive' ? refusals.ownerInactive(credentialId) : refusals.revoked();
}

/**
 * Closes agent sessions whose credential was deleted or whose bot user was deactivated. Another
 * process sharing the store may have made the change, so the watch asks the store every
 * `intervalMs` for the standing of the credentials of live sessions (one indexed query, however
 * many sessions); `checkNow()` is the same process's immediate path, called by the API after a
 * change. Binds also ask the store (`refusal()`) so none succeeds after the change.
 *
 * @example
 * const watch = new RevocationWatch({ repos, sessions: () => listener.sessions(), logger, intervalMs: 1000 });
 * watch.start(); // later: await watch.checkNow(); watch.stop();
 */
export class RevocationWatch {
  private timer: NodeJS.Timeout | undefined;
  private readonly standing: (ids: readonly string[]) => Promise<Map<string, 'ok' | 'inactive'>>;
  private readonly refusalFor: (id: string, standing: 'inactive' | undefined) => AgentError;
  constructor(private readonly options: RevocationOptions) {
    const credentials = options.credentials;
    this.standing = credentials
      ? (ids) => credentials.standing(ids)
      : (ids) => options.repos.credentials.standing(ids);
    this.refusalFor = credentials?.refusalFor ?? refusalFor;
  }

  start(): void {
    if (this.timer || this.options.intervalMs <= 0) return;
    this.timer = setInterval(() => void this.checkNow(), this.options.intervalMs).unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Check every live session against the store now. Calls made while a check runs are folded into
   * one more check after it, so a change is never missed and the store is never asked in a burst.
   */
  readonly checkNow: () => Promise<void> = coalesced(() => this.checkOnce());

  /** The refusal for a bind with `credentialId`, or undefined when the credential still stands. */
  async refusal(credentialId: string): Promise<AgentError | undefined> {
    const standing = (await this.standing([credentialId])).get(credentialId);
    return standing === 'ok' ? undefined : this.refusalFor(credentialId, standing);
  }

  private async checkOnce(): Promise<void> {
    const live = [...this.options.sessions()].filter((s) => !s.gone && s.credentialId !== '');
    if (live.length === 0) return;
    let standing: Map<string, 'ok' | 'inactive'>;
    try {
      standing = await this.standing([...new Set(live.map((s) => s.credentialId))]);
    } catch (err) {
      // The store is away (restart, network): keep sessions; the next tick asks again.
      this.options.logger.warn({ err: (err as Error).message }, 'revocation check failed');
      return;
    }
    for (const session of live) {
      const state = standing.get(session.credentialId);
      if (state === 'ok' || session.gone) continue;
      const error = this.refusalFor(session.credentialId, state);
      this.options.logger.info(
        { session: session.id, credential: session.credentialId, code: error.code },
        'credential revoked: closing the agent session',
      );
      this.options.metrics?.agentErrors.with({ code: error.code ?? 'revoked' }).inc();
      session.revoke(error);
    }
  }
}
