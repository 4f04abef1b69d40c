import { BurrowError, CODES } from '../../core/errors.js';
import { quote } from '../../core/quote.js';
import { notGrantedMessage, type SecretRead } from '../../policy/index.js';
import { rpcErrorText } from '../../protocol/index.js';

/**
 * A refusal the edge sends an agent in a reply's `Error` text: a BurrowError (status 400, the
 * agent's request was refused). `code` is the `ERR_NGROK_nnn` or `ERR_BURROW_*` the SDKs extract
 * (Go by regex, Rust by line, @ngrok/ngrok as `err.errorCode`); the few refusals with no code in
 * the catalogue carry none and are told apart by their message and `kind`. Every message says
 * what was refused and how to fix it.
 *
 * @example
 * throw new AgentError(CODES.bindNotReserved, `'app.example.com' is not reserved …`);
 * writeReply(stream, { Error: err.wireText });
 */
export class AgentError extends BurrowError {
  constructor(
    code: string | undefined,
    message: string,
    /** Metric label for refusals without a code, e.g. `unsupported_option`. */
    readonly kind = code ?? 'refused',
    options?: { cause?: unknown },
  ) {
    super(code, 400, message, {}, options);
  }

  /** The reply's `Error` text: the message, then the code on its own line. */
  get wireText(): string {
    return rpcErrorText(this.message, this.code);
  }
}

/**
 * The refusals of agent sessions and binds, one constructor per situation, so the codes and the
 * wording live in one place (docs/agents.md lists them).
 * @example throw refusals.aclName('app.example.com');
 */
export const refusals = {
  noToken: () =>
    new AgentError(
      CODES.agentNoToken,
      'No authtoken was sent. Create one with POST /credentials and configure the agent with it (authtoken / NGROK_AUTHTOKEN).',
    ),
  malformedToken: () =>
    new AgentError(
      CODES.agentMalformedToken,
      'The authtoken is malformed: it is not shaped like a token this server issues. Copy the whole token from the reply of POST /credentials.',
    ),
  invalidToken: () =>
    new AgentError(
      CODES.agentInvalidToken,
      'The authtoken is invalid or has been revoked (its credential was deleted). Create a new one with POST /credentials.',
    ),
  revoked: () =>
    new AgentError(
      CODES.agentInvalidToken,
      'The authtoken was revoked: its credential was deleted, so its sessions are closed and its binds refused. Create a new authtoken with POST /credentials.',
    ),
  tooManySessions: (max: number) =>
    new AgentError(
      CODES.agentTooManySessions,
      `This authtoken already holds ${max} agent sessions, the most one credential may hold (--agent-max-sessions-per-credential). Stop one, or use another authtoken.`,
    ),
  ownerInactive: (ownerId: string) =>
    new AgentError(
      CODES.agentOwnerInactive,
      `The authtoken's owner ${ownerId} is an inactive bot user. Activate it with PATCH /bot_users/${ownerId} {"active": true}, or use another authtoken.`,
    ),
  badHeartbeat: (which: 'interval' | 'tolerance', ns: unknown, minMs: number, maxMs: number) =>
    new AgentError(
      which === 'interval' ? CODES.agentBadHeartbeatInterval : CODES.agentBadHeartbeatTolerance,
      `The heartbeat ${which} ${JSON.stringify(ns)} ns is out of range: it must be from ${minMs} ms to ${maxMs / 1000} s.`,
    ),
  badRequest: (what: string) =>
    new AgentError(CODES.agentBadRequest, `The request payload is not valid: ${what}.`),
  notAuthenticated: () =>
    new AgentError(CODES.agentBadRequest, 'The session must authenticate (Auth) before this.'),
  alreadyAuthenticated: () =>
    new AgentError(CODES.agentBadRequest, 'The session is already authenticated.'),
  aclName: (name: string, random = false) =>
    new AgentError(
      CODES.bindNameNotPermitted,
      random
        ? `The credential ACL policy does not permit binding the random name '${name}'. Ask for a name the authtoken's ACL allows (e.g. a domain under a 'bind:*.<domain>' rule).`
        : `The credential ACL policy does not permit binding this name: '${name}'. Use a name the authtoken's ACL allows, or add a 'bind:${name}' rule to the credential.`,
    ),
  aclAddr: (addr: string) =>
    new AgentError(
      CODES.bindAddrNotPermitted,
      `The credential ACL policy does not permit binding this address: '${addr}'. Add a 'bind:${addr}' rule to the credential, or use an address its ACL allows.`,
    ),
  aclRandomAddr: () =>
    new AgentError(
      CODES.bindRandomAddrNotPermitted,
      'The credential ACL policy does not permit binding random TCP addresses. Ask for a reserved address the ACL allows (remote_addr / Opts.Addr).',
    ),
  aclLabel: (key: string, value: string) =>
    new AgentError(
      CODES.bindLabelNotPermitted,
      `The credential ACL policy does not permit binding this label: '${key}=${value}'. Add a 'bind:${key}=${value}' rule (or 'bind:${key}=*') to the credential.`,
    ),
  secretNotGranted: (field: string, read: SecretRead, credentialId: string) =>
    new AgentError(
      CODES.secretNotGranted,
      `The traffic policy may not read this secret: ${notGrantedMessage(field, read, credentialId)}`,
    ),
  nameNotReserved: (name: string, baseDomain: string) =>
    new AgentError(
      CODES.bindNotReserved,
      `You must reserve the name '${name}' before binding it: reserve it (or a wildcard covering it) with POST /reserved_domains, or use a name under ${baseDomain}, or ask for a random one.`,
    ),
  addrNotReserved: (addr: string) =>
    new AgentError(
      CODES.bindNotReserved,
      `You must reserve the TCP address '${addr}' before binding it: reserve one with POST /reserved_addrs and bind its addr, or leave the address empty for a random port.`,
    ),
  wildcardNotExact: (name: string) =>
    new AgentError(
      CODES.bindWildcardNotExact,
      `Wildcard names must be reserved exactly: reserve '${name}' itself with POST /reserved_domains to bind it.`,
    ),
  usedByEdge: (what: string, edgeId: string) =>
    new AgentError(
      CODES.bindUsedByEdge,
      `'${what}' is already reserved by the edge ${edgeId}, so agents cannot bind it directly. Start a labeled tunnel matching the edge's backend instead, or remove the hostport from the edge.`,
    ),
  /** `holder`: who holds it (holderOf), e.g. `agent session ts_…` or `TCP edge edgtcp_…`. */
  alreadyOnline: (what: string, holder?: string) =>
    new AgentError(
      CODES.bindAlreadyOnline,
      holder !== undefined && !holder.startsWith('agent session')
        ? `The endpoint '${what}' is already taken (served by ${holder}). Bind another name, or remove it from that ${holder.split(' ').slice(0, -1).join(' ')}.`
        : `The endpoint '${what}' is already online (bound by another ${holder ?? 'agent session'}). Stop that agent, bind another name, or enable pooling on every endpoint of this URL (pooling_enabled) to share its traffic.`,
    ),
  internalName: (what: string) =>
    new AgentError(
      CODES.internalName,
      `The internal endpoint ${quote(what)} must have a name ending in '.internal' (e.g. https://api.internal or tcp://db.internal:5432): internal endpoints are reached only by forward-internal, never on a public name.`,
    ),
  noLabels: () =>
    new AgentError(
      CODES.bindNoLabels,
      'A labeled tunnel must have at least one label (key=value).',
    ),
  badLabel: (message: string) =>
    new AgentError(CODES.agentBadRequest, `Invalid label: ${message}.`),
  noFreePort: (range: string) =>
    new AgentError(
      CODES.noFreeAddress,
      `No TCP port is free in the range ${range}: every port is reserved or bound. Stop an agent, delete a reserved address, or widen the server's --tcp-ports.`,
    ),
  /** An option set but not enforced: refused, never ignored (bind-options.ts). */
  unsupportedOption: (option: string, why: string) =>
    new AgentError(
      CODES.unsupportedOption,
      `The option ${option} is not supported by this server; ${why}. Remove it from the endpoint's configuration.`,
      'unsupported_option',
    ),
  /** An enforced option whose value cannot be turned into policy rules (bind-option-rules.ts). */
  badOption: (option: string, why: string) =>
    new AgentError(
      CODES.unsupportedOption,
      `The option ${option} cannot be enforced as given: ${why}. Correct its value, or remove it from the endpoint's configuration.`,
      'unsupported_option',
    ),
  unknownTunnel: (id: string) =>
    new AgentError(
      undefined,
      `No tunnel with id ${quote(id)} is bound in this session. Send the Id or TunnelID the tunnel's Bind reply gave, and bind it again if it was removed.`,
      'unknown_tunnel',
    ),
};
