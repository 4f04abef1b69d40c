import { CODES } from '../../core/errors.js';
import { AgentError } from './agent-errors.js';

/**
 * What one agent session may hold: each tunnel costs memory on the edge for as long as it lives.
 * The text each tunnel keeps (Metadata, ForwardsTo, …) is held to AGENT_FIELD_LIMITS
 * (src/protocol/tunnel/field-limits.ts), checked on every message that carries it.
 */
export const BIND_LIMITS = {
  /** Tunnels (endpoints and labeled tunnels) online at once per session; the default of the
   * `--agent-max-tunnels-per-session` option, which callers pass in. */
  maxTunnelsPerSession: 1000,
} as const;

/**
 * Refuse a bind that would take the session past its tunnel limit.
 * @example checkBindLimits(host.liveTunnelCount(), 1000);
 */
export function checkBindLimits(
  liveTunnels: number,
  maxTunnelsPerSession: number = BIND_LIMITS.maxTunnelsPerSession,
): void {
  if (liveTunnels >= maxTunnelsPerSession) {
    throw new AgentError(
      CODES.bindTooManyTunnels,
      `This agent session already serves ${liveTunnels} tunnels, the most one session may; stop some, or start another session.`,
    );
  }
}
