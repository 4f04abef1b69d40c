import { CODES } from '../../core/errors.js';
import { AgentError, refusals } from './agent-errors.js';

/** What one agent session may hold: each tunnel costs memory on the edge for as long as it lives. */
export const BIND_LIMITS = {
  /** Tunnels (endpoints and labeled tunnels) online at once per session; the default of the
   * `--agent-max-tunnels-per-session` option, which callers pass in. */
  maxTunnelsPerSession: 1000,
  /** Bytes of UTF-8 in a bind's Metadata, as the API allows for any resource's metadata. */
  maxMetadataBytes: 4096,
  /** Bytes of UTF-8 in ForwardsTo (an address or URL, for display). */
  maxForwardsToBytes: 1024,
} as const;

/**
 * Refuse a bind that would take the session past its tunnel limit or that carries oversized text.
 * @example checkBindLimits(host.liveTunnelCount(), { metadata, forwardsTo }, 1000);
 */
export function checkBindLimits(
  liveTunnels: number,
  text: { metadata: string; forwardsTo: string },
  maxTunnelsPerSession: number = BIND_LIMITS.maxTunnelsPerSession,
): void {
  const { maxMetadataBytes, maxForwardsToBytes } = BIND_LIMITS;
  if (liveTunnels >= maxTunnelsPerSession) {
    throw new AgentError(
      CODES.bindTooManyTunnels,
      `This agent session already serves ${liveTunnels} tunnels, the most one session may; stop some, or start another session.`,
    );
  }
  for (const [field, value, max] of [
    ['Metadata', text.metadata, maxMetadataBytes],
    ['ForwardsTo', text.forwardsTo, maxForwardsToBytes],
  ] as const) {
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > max) throw refusals.badRequest(`${field} is ${bytes} bytes; the limit is ${max}`);
  }
}
