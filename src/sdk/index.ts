/**
 * `burrow/sdk`: put a local service behind a Burrow edge from TypeScript.
 *
 * @example
 * import { connect } from 'burrow/sdk';
 *
 * const session = await connect({
 *   serverAddr: '127.0.0.1:4443',
 *   authtoken: process.env.BURROW_AUTHTOKEN!,
 *   ca: './burrow-data/ca.pem',
 * });
 * const endpoint = await session.httpEndpoint();
 * endpoint.forward('localhost:3000');
 * console.log(`Forwarding ${endpoint.url} -> localhost:3000`);
 */
export { connect, Session } from './session.js';
export type { SessionEvents } from './session.js';
export { backoffDelay } from './options.js';
export type { ConnectOptions } from './options.js';
export { Endpoint } from './endpoints.js';
export type {
  ConnectionInfo,
  EndpointEvents,
  EndpointOptions,
  EndpointProto,
  HttpEndpointOptions,
  LabeledTunnelOptions,
  TcpEndpointOptions,
  TlsEndpointOptions,
} from './endpoints.js';
export { parseLocalAddress, UPSTREAM_UNREACHABLE_CODE } from './forward.js';
export type { ForwardTarget, LocalAddress } from './forward.js';
export type { CapturedMessage, HttpExchange } from './http-observer.js';
export { BurrowAgentError } from './errors.js';
export {
  BurrowConnectError,
  CLI_HINTS,
  describeConnectError,
  describeConnectFailure,
  SDK_HINTS,
} from './connect-errors.js';
export type {
  ConnectFailure,
  ConnectFailureKind,
  ConnectHints,
  PresentedCertificate,
} from './connect-errors.js';
export { certificateFingerprint, parseCaFingerprint } from './trust.js';
export type { CaSource } from './trust.js';
