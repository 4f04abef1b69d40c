/**
 * The traffic policy engine: one engine for edges' `traffic_policy` modules, agent binds that
 * carry a `TrafficPolicy`, and the device agent's `policy`. Language and actions are documented
 * for users in docs/traffic-policy.md; this is the interface the edge, the API and the agent use.
 *
 * 1. Save time (API, bind, device agent): refuse what cannot run, with a 400-style error.
 *
 *      validatePolicy(text, 'tls', 'traffic_policy.value'); // throws ValidationError (ERR_NGROK_22xx)
 *
 *    Protocols: `tcp` and `tls` run only on_tcp_connect (older `inbound` maps there); `http` and
 *    `https` run on_tcp_connect, on_http_request (`inbound`) and on_http_response (`outbound`).
 *    A structured document (a legacy bind `Policy` object, the device agent's JSON) goes through
 *    `compilePolicy(parsePolicyValue(value, field), { protocol, field })`.
 *
 * 2. Attach: compile (cached by protocol and text, so re-reading the same text is free) and bind
 *    to the owner. A runner holds the owner's state (rate-limit counters) and sends its events.
 *
 *      const events = new PolicyEventLog({ logger });            // one per process; also the API's source
 *      const runner = compilePolicy(text, { protocol: 'http' }).bind({
 *        ownerId: edge.id,                                         // or the endpoint/tunnel id
 *        events,
 *        ipPolicyRules: (ids) => rulesOf(ids),                     // [{ cidr, action }] of those IP policies
 *      });
 *
 *    When the policy changes (PUT traffic_policy, module disabled or deleted), compile and bind
 *    again and swap the runner the listener uses: the next connection or request gets the new
 *    policy, and no agent reconnects. A disabled module (`enabled: false`) binds nothing.
 *
 * 3. Run. Each method takes plain objects (see variables.ts: ConnInput, RequestInput,
 *    ResponseInput, EndpointInput) and returns a decision to apply. Results are synchronous
 *    unless an action had to wait (restrict-ips with `ip_policies`), then a promise; `await`
 *    works for both, or test `instanceof Promise` to keep the fast path synchronous.
 *
 *      // every accepted connection (TCP, TLS and HTTP(S) listeners): conn.tls.version from the
 *      // TLS socket ('TLSv1.3' is accepted), conn.client_ip/port from the socket
 *      const c = await runner.onTcpConnect({ conn, endpoint });
 *      if (c.kind === 'close') return socket.destroy();
 *
 *      // every HTTP request
 *      const d = await runner.onHttpRequest({ conn, endpoint, req, vars: c.vars });
 *      d.kind === 'respond'  → write d.status, d.headers, d.body; do not contact the upstream
 *      d.kind === 'close'    → destroy the socket without answering
 *      d.kind === 'continue' → applyHeaderChanges(upstreamHeaders, d.headers); if d.rewrite, send
 *                              d.rewrite (path and query) as the request target
 *
 *      // every upstream response
 *      const r = await runner.onHttpResponse({ conn, endpoint, req, res, vars: d.vars });
 *      r.kind === 'respond'  → drop the upstream body, write r.status, r.headers, r.body
 *      r.kind === 'continue' → applyHeaderChanges(responseHeaders, r.headers); if r.compress, pipe
 *                              the body through zlib (br: createBrotliCompress, gzip: createGzip,
 *                              deflate: createDeflate); the headers already say so
 *
 *    Skip a phase cheaply with `policy.has(phase)`. A rule whose expression fails at run time
 *    (a missing header indexed with []) fails closed when it guards (deny, auth, restrict-ips…)
 *    and is skipped otherwise (`on_expression_error` overrides it); an `error` event says why.
 *
 *    Process-wide data, set once at start: `configureIpIntelligence(await openIpIntelligence(
 *    config.geoip))` (conn.client_ip.geo…, watched files) and `configureManagedOAuthApps(…)`.
 *
 * 4. Events: `log` actions and decisions (denied, closed, responded, redirected, rate-limited,
 *    restricted, unauthorized, error) go to the logger and to a ring of the last 1000 per owner.
 *    Pass the same PolicyEventLog to the API as `online.policyEvents`; it serves
 *    `GET /edges/{tcp|tls}/{id}/traffic_policy/events`. Call `events.forget(id)` when an owner goes.
 */

export { validatePolicy } from './validate.js';
export {
  compilePolicy,
  compileDocument,
  compiledPolicyCacheSize,
  estimatedPolicyBytes,
  CompiledPolicy,
  type CompiledRule,
  type CompilePolicyOptions,
} from './compile.js';
export {
  PolicyRunner,
  type ForwardInternal,
  type HttpRequestDecision,
  type HttpRequestInput,
  type HttpResponseDecision,
  type HttpResponseInput,
  type PolicyRunnerOptions,
  type PolicyVars,
  type RespondDecision,
  type TcpConnectDecision,
  type TcpConnectInput,
  type TlsTermination,
  type TlsTerminator,
} from './runner.js';
export {
  DISCARD_EVENTS,
  geoOf,
  PolicyEventLog,
  PolicyEventRing,
  type IpPolicyRule,
  type PolicyEvent,
  type PolicyEventOutcome,
  type PolicyEventSink,
  type PolicyEventSource,
} from './events.js';
export {
  applyHeaderChanges,
  NO_HEADER_CHANGES,
  type HeaderChanges,
  type HeaderInput,
} from './headers.js';
export type {
  ConnInput,
  EndpointInput,
  GeoInput,
  RequestInput,
  ResponseInput,
  TlsInput,
} from './variables.js';
export type {
  BodyReplacement,
  BodyRewrite,
  CompressionEncoding,
  Refusal,
} from './actions/types.js';
export {
  isHttpProtocol,
  parsePolicyDocument,
  parsePolicyValue,
  toPhases,
  POLICY_PHASES as POLICY_PHASES_OF_DOCUMENT,
  type PolicyAction,
  type PolicyDocument,
  type PolicyRule,
  type PolicyPhase,
  type PolicyProtocol,
} from './parse.js';
export { EXPRESSION_LIMITS } from './cel.js';
export {
  configureIpIntelligence,
  lookupIpIntel,
  openIpIntelligence,
  type IpIntel,
  type IpIntelligenceSource,
} from './ip-intel.js';
export { configureManagedOAuthApps } from './actions/login-config.js';
export { missingIpPoliciesMessage } from './actions/restrict-ips.js';
export {
  NO_SECRETS,
  notGrantedMessage,
  SecretsResolver,
  ungrantedSecretRead,
  type SecretRead,
  type SecretRef,
  type SecretsLookup,
  type SecretValue,
} from './secrets.js';
