import { utf8Length } from '../../core/bytes.js';
import type { MessageName } from './messages.js';

/**
 * Every text field an agent writes, with the most bytes of UTF-8 it may carry, in one table:
 * whichever message carries a field (`AGENT_FIELD_CARRIERS`), the same limit applies, so no
 * message is a way around another's limit (docs/security.md, "Limits of agent-written fields").
 * Fields the edge keeps for as long as the session or tunnel lives (metadata, names) are held to
 * what a person writes; fields it only checks and drops (tokens) to what a client could send.
 * Traffic policies, labels and hostnames have rules of their own (the request size, LABEL_LIMITS,
 * DNS name rules).
 */
export const AGENT_FIELD_LIMITS = {
  /** Free text shown by the API: as much as any resource's metadata (API `metadata`). */
  Metadata: 4096,
  Description: 4096,
  /** Where the agent forwards to, for display. */
  ForwardsTo: 1024,
  ForwardsProto: 64,
  /** Ids the agent names: a bind id (kept with every tunnel of the bind), a tunnel id, a client id. */
  Id: 256,
  Name: 256,
  /** What the agent says of itself (Auth), kept with the session. */
  OS: 256,
  Arch: 256,
  Version: 256,
  ClientType: 256,
  Hostname: 1024,
  UserAgent: 1024,
  /** Why the agent cannot stop, restart or update (kept, shown when a command is refused). */
  UnsupportedError: 1024,
  /** Secrets the edge verifies and does not keep. */
  AuthToken: 4096,
  Cookie: 4096,
  Token: 4096,
} as const;

export type AgentField = keyof typeof AGENT_FIELD_LIMITS;

/** Where each agent message carries agent-written text: its path in the message and its field. */
const AGENT_FIELD_CARRIERS: Partial<
  Record<MessageName, ReadonlyArray<readonly [path: string, field: AgentField]>>
> = {
  Auth: [
    ['ClientId', 'Id'],
    ['Extra.OS', 'OS'],
    ['Extra.Arch', 'Arch'],
    ['Extra.AuthToken', 'AuthToken'],
    ['Extra.Version', 'Version'],
    ['Extra.Hostname', 'Hostname'],
    ['Extra.UserAgent', 'UserAgent'],
    ['Extra.Metadata', 'Metadata'],
    ['Extra.Cookie', 'Cookie'],
    ['Extra.ClientType', 'ClientType'],
    ['Extra.UpdateUnsupportedError', 'UnsupportedError'],
    ['Extra.StopUnsupportedError', 'UnsupportedError'],
    ['Extra.RestartUnsupportedError', 'UnsupportedError'],
  ],
  Bind: [
    ['Id', 'Id'],
    ['ForwardsTo', 'ForwardsTo'],
    ['ForwardsProto', 'ForwardsProto'],
    ['Extra.Name', 'Name'],
    ['Extra.Token', 'Token'],
    ['Extra.Metadata', 'Metadata'],
    ['Extra.Description', 'Description'],
  ],
  Unbind: [['Id', 'Id']],
  StartTunnelWithLabel: [
    ['ForwardsTo', 'ForwardsTo'],
    ['ForwardsProto', 'ForwardsProto'],
    ['Metadata', 'Metadata'],
  ],
  PatchTunnelState: [
    ['TunnelId', 'Id'],
    ['Name', 'Name'],
    ['Description', 'Description'],
    ['Metadata', 'Metadata'],
  ],
};

function valueAt(message: unknown, path: string): unknown {
  let value = message;
  for (const key of path.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/**
 * The first agent-written field of a decoded message over its limit, as a sentence naming the
 * field and the rule, or undefined when every field is within AGENT_FIELD_LIMITS. Values that are
 * not text are left to the message's own checks.
 * @example agentFieldProblem('PatchTunnelState', { Metadata: 'x'.repeat(5000) })
 *   // 'PatchTunnelState: Metadata is 5000 bytes; the limit is 4096'
 */
export function agentFieldProblem(name: MessageName, message: unknown): string | undefined {
  for (const [path, field] of AGENT_FIELD_CARRIERS[name] ?? []) {
    const value = valueAt(message, path);
    if (typeof value !== 'string') continue;
    const max = AGENT_FIELD_LIMITS[field];
    // Cheap first: a string of n UTF-16 units has at most 3n and at least n bytes of UTF-8.
    if (value.length * 3 <= max) continue;
    const bytes = utf8Length(value);
    if (bytes > max) return `${name}: ${path} is ${bytes} bytes; the limit is ${max}`;
  }
  return undefined;
}
