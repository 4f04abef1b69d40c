/**
 * The error catalogue, and the root of every error class Burrow throws (BurrowError). Every error
 * Burrow reports carries a stable string code: `ERR_NGROK_nnn` (the codes of the API and agent
 * protocol Burrow is compatible with, so existing clients can match on them), or `ERR_BURROW_*`
 * for what that catalogue has no code for. The same code appears in logs, API bodies
 * (`error_code`), ingress error pages (`Burrow-Error-Code`), agent replies and SDK errors
 * (`err.code`); docs/errors.md lists them all. Errors carry an HTTP status for where they reach
 * HTTP, and the error they wrap as the standard `cause`. Subclasses group errors by how a client
 * should react.
 *
 * @example
 * throw new ValidationError(CODES.descriptionTooLong, 'description', 'must be at most 255 bytes of UTF-8');
 * @example
 * throw new BurrowError(CODES.agentUnreachable, 502, 'the agent did not answer', {}, { cause: err });
 */

/** Codes by name. Values are the wire codes; names say what went wrong. */
export const CODES = {
  // Authentication and versioning (API)
  missingAuth: 'ERR_NGROK_200',
  malformedAuth: 'ERR_NGROK_201',
  invalidApiKey: 'ERR_NGROK_203',
  /** The key's owner (a bot user, a dashboard user) was deactivated or deleted. */
  apiKeyOwnerInactive: 'ERR_BURROW_API_KEY_OWNER_INACTIVE',
  /** A key tried to change its own owner's `active`. */
  apiKeyOwnOwner: 'ERR_BURROW_API_KEY_OWN_OWNER',
  /** The role or scopes of the key or dashboard user do not allow the route (403). */
  permissionDenied: 'ERR_BURROW_PERMISSION_DENIED',
  /** The change would leave no admin dashboard user. */
  lastAdmin: 'ERR_BURROW_LAST_ADMIN',
  unsupportedVersion: 'ERR_NGROK_217',
  missingVersion: 'ERR_NGROK_218',
  // Request shape
  badContentType: 'ERR_NGROK_216',
  unreadableBody: 'ERR_NGROK_212',
  malformedJson: 'ERR_NGROK_213',
  unknownField: 'ERR_NGROK_214',
  invalidValue: 'ERR_NGROK_215',
  invalidReference: 'ERR_NGROK_223',
  invalidIdPrefix: 'ERR_NGROK_227',
  malformedQuery: 'ERR_NGROK_230',
  unknownQueryParam: 'ERR_NGROK_231',
  invalidLimit: 'ERR_NGROK_233',
  rateLimited: 'ERR_NGROK_226',
  // Field limits
  descriptionTooLong: 'ERR_NGROK_7073',
  metadataTooLong: 'ERR_NGROK_100',
  // Reserved domains
  invalidDomain: 'ERR_NGROK_400',
  wildcardNotFirstLabel: 'ERR_NGROK_402',
  domainAlreadyReserved: 'ERR_NGROK_413',
  invalidCertificatePolicy: 'ERR_NGROK_420',
  policyOnServerDomain: 'ERR_NGROK_439',
  domainInUse: 'ERR_NGROK_446',
  // Reserved addresses
  addrInUse: 'ERR_NGROK_446',
  noFreeAddress: 'ERR_NGROK_503',
  // Credentials
  invalidAclRule: 'ERR_NGROK_600',
  invalidOwner: 'ERR_NGROK_630',
  /** An SSH public key that is malformed, of a type not accepted, or RSA under 2048 bits. */
  sshKeyInvalid: 'ERR_BURROW_SSH_KEY_INVALID',
  /** The SSH public key is already an SSH credential's (one key, one credential). */
  sshKeyTaken: 'ERR_BURROW_SSH_KEY_TAKEN',
  // IP policies
  invalidCidr: 'ERR_NGROK_1406',
  duplicateCidr: 'ERR_NGROK_1408',
  cidrNotNetworkAddress: 'ERR_NGROK_1409',
  cidrMissingMask: 'ERR_NGROK_1413',
  invalidIpAction: 'ERR_NGROK_1410',
  ipPolicyInUse: 'ERR_NGROK_1420',
  // Bot users
  botNameEmpty: 'ERR_NGROK_4109',
  botNameTaken: 'ERR_NGROK_4112',
  botUserInUse: 'ERR_NGROK_4113',
  // Backends
  backendLabelCount: 'ERR_NGROK_6508',
  backendLabelKey: 'ERR_NGROK_6509',
  backendLabelValue: 'ERR_NGROK_6510',
  backendNotFound: 'ERR_NGROK_6514',
  backendLabelEquals: 'ERR_NGROK_6531',
  backendInUse: 'ERR_NGROK_6502',
  // Certificate authorities
  invalidCaPem: 'ERR_NGROK_7400',
  caInUse: 'ERR_NGROK_7401',
  // TLS certificates (uploaded or ACME-issued)
  invalidCertificatePem: 'ERR_NGROK_7402',
  invalidPrivateKeyPem: 'ERR_NGROK_7403',
  certificateKeyMismatch: 'ERR_NGROK_7404',
  certificateInUse: 'ERR_NGROK_7405',
  certificateNotFound: 'ERR_NGROK_7406',
  certificateAndPolicy: 'ERR_NGROK_434',
  // Edges
  hostportFormat: 'ERR_NGROK_7104',
  hostportPortRange: 'ERR_NGROK_7112',
  addrNotReserved: 'ERR_NGROK_7113',
  domainWrongPort: 'ERR_NGROK_7116',
  domainNotReserved: 'ERR_NGROK_7117',
  tcpEdgeNeedsAddr: 'ERR_NGROK_7120',
  hostportTaken: 'ERR_NGROK_7122',
  tlsEdgeNeedsDomain: 'ERR_NGROK_7133',
  ipPolicyNotFound: 'ERR_NGROK_7007',
  ipRestrictionNeedsPolicy: 'ERR_NGROK_7025',
  caNotFound: 'ERR_NGROK_7072',
  moduleNeedsTermination: 'ERR_NGROK_7062',
  invalidTerminateAt: 'ERR_NGROK_224',
  moduleRemovalInPatch: 'ERR_NGROK_7028',
  // Traffic policy
  policyInvalidExpression: 'ERR_NGROK_2200',
  policyInvalidAction: 'ERR_NGROK_2201',
  policyActionPhase: 'ERR_NGROK_2202',
  policyActionConfig: 'ERR_NGROK_2203',
  policyActionValue: 'ERR_NGROK_2204',
  policyActionProtocol: 'ERR_NGROK_2205',
  policyNoActions: 'ERR_NGROK_2206',
  policyUnreachableAction: 'ERR_NGROK_2207',
  policyPhase: 'ERR_NGROK_2230',
  policyUnparseable: 'ERR_NGROK_2236',
  // Agent sessions (edge; sent in the agent protocol's Error text)
  agentMalformedToken: 'ERR_NGROK_105',
  agentInvalidToken: 'ERR_NGROK_107',
  agentBadCookie: 'ERR_NGROK_110',
  agentBadHeartbeatInterval: 'ERR_NGROK_111',
  agentBadHeartbeatTolerance: 'ERR_NGROK_112',
  agentOwnerInactive: 'ERR_NGROK_636',
  agentNoToken: 'ERR_NGROK_4018',
  agentBadRequest: 'ERR_NGROK_801',
  agentTooManySessions: 'ERR_NGROK_108',
  /** Requests in progress on a session, credential or process hold the most bytes allowed. */
  agentRpcBytes: 'ERR_BURROW_AGENT_RPC_BYTES',
  /** The policies of a session's (or the edge's) live tunnels would weigh more than allowed. */
  agentPolicyBytes: 'ERR_BURROW_AGENT_POLICY_BYTES',
  // Agent binds
  bindAddrNotPermitted: 'ERR_NGROK_308',
  bindNameNotPermitted: 'ERR_NGROK_316',
  bindNotReserved: 'ERR_NGROK_319',
  bindWildcardNotExact: 'ERR_NGROK_321',
  bindAlreadyOnline: 'ERR_NGROK_334',
  bindRandomAddrNotPermitted: 'ERR_NGROK_356',
  bindUsedByEdge: 'ERR_NGROK_381',
  bindNoLabels: 'ERR_NGROK_394',
  bindLabelNotPermitted: 'ERR_NGROK_399',
  bindTooManyTunnels: 'ERR_NGROK_324',
  /** The bind's policy reads a vault its authtoken's ACL grants no `secrets:read:` for. */
  secretNotGranted: 'ERR_BURROW_SECRET_NOT_GRANTED',
  // Remote commands to agents (API)
  agentRestartUnsupported: 'ERR_NGROK_804',
  agentStopUnsupported: 'ERR_NGROK_805',
  agentCommandFailed: 'ERR_NGROK_808',
  agentUnreachable: 'ERR_NGROK_810',
  // Ingress (error pages and the Burrow-Error-Code header) and agents' forwarding
  tunnelNotFound: 'ERR_NGROK_3200',
  tunnelUnreachable: 'ERR_NGROK_3004',
  upstreamUnreachable: 'ERR_NGROK_8012',
  // Burrow's own codes: no ngrok code fits
  internalName: 'ERR_BURROW_INTERNAL_NAME',
  unsupportedOption: 'ERR_BURROW_UNSUPPORTED_OPTION',
  certificateRefused: 'ERR_BURROW_CERTIFICATE_REFUSED',
  nameTaken: 'ERR_BURROW_NAME_TAKEN',
  storeFull: 'ERR_BURROW_STORE_FULL',
  storeUnavailable: 'ERR_BURROW_STORE_UNAVAILABLE',
  signInFailed: 'ERR_BURROW_SESSION_1',
  sessionExpired: 'ERR_BURROW_SESSION_2',
  csrfRefused: 'ERR_BURROW_SESSION_3',
  setupLinkInvalid: 'ERR_BURROW_SESSION_4',
  misdirectedRequest: 'ERR_BURROW_MISDIRECTED_REQUEST',
  cloudEndpointUnhandled: 'ERR_BURROW_CLOUD_ENDPOINT_UNHANDLED',
  internalEndpointOffline: 'ERR_BURROW_INTERNAL_ENDPOINT_OFFLINE',
  forwardLoop: 'ERR_BURROW_FORWARD_LOOP',
  tooManyHeaders: 'ERR_BURROW_TOO_MANY_HEADERS',
  missingHost: 'ERR_BURROW_MISSING_HOST',
  badRequestTarget: 'ERR_BURROW_BAD_REQUEST_TARGET',
  unsafeRequestHead: 'ERR_BURROW_UNSAFE_REQUEST_HEAD',
  unsafeResponseHead: 'ERR_BURROW_UNSAFE_RESPONSE_HEAD',
  plainHttpOnHttpsPort: 'ERR_BURROW_PLAIN_HTTP_ON_HTTPS_PORT',
  tunnelConnectTimeout: 'ERR_BURROW_TUNNEL_CONNECT_TIMEOUT',
  policyFailed: 'ERR_BURROW_POLICY_FAILED',
  /** restrict-ips (IP policies, --cidr-allow/--cidr-deny) refused the client's address. */
  ipRestricted: 'ERR_BURROW_IP_RESTRICTED',
  /** A deny action without a body of its own refused the request. */
  policyDenied: 'ERR_BURROW_POLICY_DENIED',
  proxyProtocolInvalid: 'ERR_BURROW_PROXY_PROTOCOL',
  // Login pages of the oauth and openid-connect actions
  loginRefused: 'ERR_BURROW_LOGIN_REFUSED',
  loginProviderFailed: 'ERR_BURROW_LOGIN_PROVIDER',
  // Outbound calls a policy makes (core/egress-guard.ts)
  egressRefused: 'ERR_BURROW_EGRESS_REFUSED',
  egressFailed: 'ERR_BURROW_EGRESS_FAILED',
  // Cluster: links between the nodes of one cluster
  nodeUnreachable: 'ERR_BURROW_NODE_UNREACHABLE',
  nodeConnectTimeout: 'ERR_BURROW_NODE_CONNECT_TIMEOUT',
  nodeLinkProtocol: 'ERR_BURROW_NODE_LINK_PROTOCOL',
  // Process start-up (CLI)
  invalidConfig: 'ERR_BURROW_CONFIG',
  agentStartup: 'ERR_BURROW_AGENT_STARTUP',
  agentStateFile: 'ERR_BURROW_AGENT_STATE_FILE',
  // Agent sessions' muxado layer: one per wire error number (MUX_WIRE_CODES), see MuxError
  muxNone: 'ERR_BURROW_MUX_NONE',
  muxProtocol: 'ERR_BURROW_MUX_PROTOCOL',
  muxInternal: 'ERR_BURROW_MUX_INTERNAL',
  muxFlowControl: 'ERR_BURROW_MUX_FLOW_CONTROL',
  muxStreamClosed: 'ERR_BURROW_MUX_STREAM_CLOSED',
  muxStreamRefused: 'ERR_BURROW_MUX_STREAM_REFUSED',
  muxStreamCancelled: 'ERR_BURROW_MUX_STREAM_CANCELLED',
  muxStreamReset: 'ERR_BURROW_MUX_STREAM_RESET',
  muxFrameSize: 'ERR_BURROW_MUX_FRAME_SIZE',
  muxAcceptQueueFull: 'ERR_BURROW_MUX_ACCEPT_QUEUE_FULL',
  muxEnhanceYourCalm: 'ERR_BURROW_MUX_ENHANCE_YOUR_CALM',
  muxRemoteGoneAway: 'ERR_BURROW_MUX_REMOTE_GONE_AWAY',
  muxStreamsExhausted: 'ERR_BURROW_MUX_STREAMS_EXHAUSTED',
  muxWriteTimeout: 'ERR_BURROW_MUX_WRITE_TIMEOUT',
  muxSessionClosed: 'ERR_BURROW_MUX_SESSION_CLOSED',
  muxPeerEof: 'ERR_BURROW_MUX_PEER_EOF',
  muxUnknown: 'ERR_BURROW_MUX_UNKNOWN',
} as const;

/**
 * Muxado's error numbers, as RST and GOAWAY frames carry them on the wire (ErrorCode in
 * src/protocol/muxado/frame.ts), and the string code each has everywhere else.
 */
export const MUX_WIRE_CODES: Readonly<Record<number, ErrorCode>> = {
  0: CODES.muxNone,
  1: CODES.muxProtocol,
  2: CODES.muxInternal,
  3: CODES.muxFlowControl,
  4: CODES.muxStreamClosed,
  5: CODES.muxStreamRefused,
  6: CODES.muxStreamCancelled,
  7: CODES.muxStreamReset,
  8: CODES.muxFrameSize,
  9: CODES.muxAcceptQueueFull,
  10: CODES.muxEnhanceYourCalm,
  11: CODES.muxRemoteGoneAway,
  12: CODES.muxStreamsExhausted,
  13: CODES.muxWriteTimeout,
  14: CODES.muxSessionClosed,
  15: CODES.muxPeerEof,
  0xff: CODES.muxUnknown,
};

/**
 * The string code of a muxado wire error number (`ERR_BURROW_MUX_UNKNOWN` for numbers muxado
 * does not define).
 * @example muxCode(5) // 'ERR_BURROW_MUX_STREAM_REFUSED'
 */
export function muxCode(wireCode: number): ErrorCode {
  return MUX_WIRE_CODES[wireCode] ?? CODES.muxUnknown;
}

/**
 * The HTTP status of errors that are not about an HTTP request (agent sessions, start-up): what
 * they become if one reaches the API anyway.
 */
export const NO_HTTP_STATUS = 500;

export type ErrorCode = (typeof CODES)[keyof typeof CODES];

/**
 * The root of Burrow's errors (as UndiciError and FastifyError are of theirs): a string code
 * (absent only for plain 404s), the HTTP status it maps to, string details, and, when it wraps
 * another failure, that failure as the standard `cause`.
 */
export class BurrowError extends Error {
  readonly code: string | undefined;
  readonly statusCode: number;
  readonly details: Record<string, string>;

  constructor(
    code: string | undefined,
    statusCode: number,
    message: string,
    details: Record<string, string> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.statusCode = statusCode;
    this.details = details;
  }
}

/** 400: a value broke a rule. `field` is the JSON path of the offending field, when there is one. */
export class ValidationError extends BurrowError {
  readonly field: string | undefined;
  /**
   * The message is shown as `<field>: <message>`, so every complaint about a field reads the same
   * way; `sentence: true` keeps a message that names the field in a sentence of its own.
   * `cause`: the error this one reports, when it wraps one.
   */
  constructor(
    code: string,
    field: string | undefined,
    message: string,
    options: { sentence?: boolean; cause?: unknown } = {},
  ) {
    const prefixed = field && !options.sentence && !message.startsWith(`${field}: `);
    const cause = 'cause' in options ? { cause: options.cause } : undefined;
    super(code, 400, prefixed ? `${field}: ${message}` : message, {}, cause);
    this.field = field;
    if (field) this.details.field = field;
  }
}

/**
 * 400: the body named a field the resource does not have. The client chose the name, so `field`
 * must come shortened (fieldName in src/api/error-handler.ts does that).
 */
export class UnknownFieldError extends ValidationError {
  constructor(field: string, supported: readonly string[]) {
    super(
      CODES.unknownField,
      field,
      `The parameter '${field}' is unknown. Supported fields are: ${supported.join(', ') || '(none)'}.`,
      { sentence: true },
    );
  }
}

/** 401: no credentials, or credentials that do not check out. */
export class AuthenticationError extends BurrowError {
  constructor(code: string, message: string) {
    super(code, 401, message);
  }
}

/** 404: the id names nothing. The body has no error code, as clients expect. */
export class NotFoundError extends BurrowError {
  constructor(message = 'Resource not found', details: Record<string, string> = {}) {
    super(undefined, 404, message, details);
  }
}

/** 409: the change conflicts with something that exists (a duplicate, or a live reference). */
export class ConflictError extends BurrowError {
  constructor(code: string, message: string) {
    super(code, 409, message);
  }
}

/** 429: too many requests; `retryAfterSeconds` goes to the Retry-After header. */
export class RateLimitError extends BurrowError {
  readonly retryAfterSeconds: number;
  constructor(retryAfterSeconds: number) {
    super(
      CODES.rateLimited,
      429,
      `Too many requests: the API rate limit is exceeded. Retry after ${retryAfterSeconds} seconds.`,
    );
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** 503: the server cannot do this now (for example, no free port is left to reserve). */
export class UnavailableError extends BurrowError {
  constructor(code: string, message: string) {
    super(code, 503, message);
  }
}
