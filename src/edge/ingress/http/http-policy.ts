/**
 * Traffic policy on the HTTP ingress, for tunnels that have one (`tunnel.policy`): on_tcp_connect
 * once per connection and tunnel (at its first request, when the Host header has said which
 * tunnel it is for), on_http_request before the request goes upstream, on_http_response on the
 * upstream's response head. Tunnels without a policy never get here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { Duplex, Transform } from 'node:stream';
import { responseTransforms, rewriter } from './body-transforms.js';
import {
  NO_HEADER_CHANGES,
  type BodyRewrite,
  type ConnInput,
  type ForwardInternal,
  type HeaderChanges,
  type HttpRequestDecision,
  type HttpResponseDecision,
  type PolicyVars,
  type RequestInput,
  type RespondDecision,
  type TcpConnectDecision,
} from '../../../policy/index.js';
import { rawErrorResponse, sendErrorPage, type IngressError } from '../error-pages.js';
import { connInputOf } from '../policy-gate.js';
import { routingHost } from './http-forwarding.js';
import {
  POLICY_FAILED,
  rawResponse,
  rewrittenRequest,
  writeDecision,
  writeFailure,
} from './http-policy-writes.js';
import { bodyReader, type BodyHolder } from './http-policy-body.js';
import {
  applyToRawHeaders,
  REQUEST_OWNED,
  RESPONSE_ADD_OWNED,
  RESPONSE_REMOVE_OWNED,
} from './header-changes.js';
import type { UpstreamResponse } from './http-responses.js';
import type { TunnelPolicy } from '../../registry/tunnel-registry.js';

export type Settled<T> = T | Promise<T>;

function settle<T>(value: Settled<T>, next: (v: T) => void, fail: (err: unknown) => void): void {
  if (value instanceof Promise) value.then(next, fail);
  else next(value);
}

/** What the policy knows of a public connection: its variables, and what each tunnel's on_tcp_connect left. */
export interface ConnectionPolicyState {
  conn: ConnInput;
  admitted: Map<TunnelPolicy, PolicyVars>;
  /** on_tcp_connect decisions the lean relay started and the full path finishes (http-policy-lean.ts). */
  decided: Map<TunnelPolicy, Settled<TcpConnectDecision>>;
}

const connections = new WeakMap<Duplex, ConnectionPolicyState>();

/** The policy state of a public connection, made at its first use. */
export function connectionState(socket: Duplex): ConnectionPolicyState {
  let state = connections.get(socket);
  if (!state) {
    const tls = socket as Partial<TLSSocket>;
    const encrypted = tls.encrypted === true;
    state = {
      conn: connInputOf(
        socket as TLSSocket,
        encrypted
          ? {
              version: tls.getProtocol?.() ?? undefined,
              cipher_suite: tls.getCipher?.()?.standardName,
              sni: typeof tls.servername === 'string' ? tls.servername : undefined,
              negotiated_alpn: typeof tls.alpnProtocol === 'string' ? tls.alpnProtocol : undefined,
              session_resumed: tls.isSessionReused?.(),
            }
          : undefined,
      ),
      admitted: new Map(),
      decided: new Map(),
    };
    connections.set(socket, state);
  }
  return state;
}

/** The `req.*` input of a request as received. */
function requestInputOf(
  req: IncomingMessage,
  encrypted: boolean,
  holder?: BodyHolder,
): RequestInput {
  return {
    method: req.method ?? 'GET',
    url: req.url ?? '/',
    scheme: encrypted ? 'https' : 'http',
    headers: req.headers,
    version: req.httpVersion,
    // req.ts.header_received: now, before any rule reads the body (it would be later then).
    received: Date.now(),
    body: holder ? bodyReader(req, holder) : undefined,
    trailers: () => req.trailers,
  };
}

/** A request that passed on_http_request: what to change upstream, and the response phase. */
export class HttpPolicyFlow {
  constructor(
    private readonly policy: TunnelPolicy,
    private readonly conn: ConnInput,
    private readonly req: RequestInput,
    private readonly changes: HeaderChanges,
    private readonly vars: PolicyVars,
    /** The body, when an action read it whole: send this upstream, the stream is spent. */
    readonly body?: Buffer | undefined,
    /** forward-internal chose an internal endpoint for the request. */
    readonly forwardInternal?: ForwardInternal | undefined,
    /** request-body-find-replace: the rewrite the body streams through. */
    private readonly requestRewrite?: BodyRewrite | undefined,
  ) {}

  /**
   * request-body-find-replace: `headers` (the upstream request's) with the length dropped and the
   * body sent chunked, and the transform the body goes through; undefined when it is not
   * rewritten. Call it only for a request that has a body.
   */
  rewriteRequestBody(headers: string[]): { headers: string[]; body: Transform } | undefined {
    if (!this.requestRewrite) return undefined;
    const out: string[] = [];
    for (let i = 0; i < headers.length; i += 2) {
      const lower = headers[i]!.toLowerCase();
      if (lower !== 'content-length' && lower !== 'transfer-encoding')
        out.push(headers[i]!, headers[i + 1]!);
    }
    out.push('Transfer-Encoding', 'chunked');
    return { headers: out, body: rewriter(this.requestRewrite) };
  }

  /** The upstream request's raw headers with the policy's changes (X-Forwarded-* stay the ingress's). */
  requestHeaders(raw: string[]): string[] {
    return applyToRawHeaders(raw, this.changes, REQUEST_OWNED);
  }

  /**
   * Run on_http_response on the upstream's response head. Either the response is replaced here
   * (custom-response: the upstream body is dropped), or `pass` writes it with the changed
   * headers, its body through `transforms`: a find-replace's rewrite, then compress-response's
   * encoder.
   */
  response(
    up: UpstreamResponse,
    res: ServerResponse,
    head: string[],
    pass: (headers: string[], transforms: readonly Transform[]) => void,
  ): void {
    const runner = this.policy.runner;
    if (!runner.policy.has('on_http_response')) {
      pass(head, []);
      return;
    }
    const apply = (d: HttpResponseDecision): void => {
      if (d.kind === 'respond') {
        up.destroy();
        writeDecision(res, d);
        return;
      }
      const transforms = responseTransforms(d);
      pass(
        applyToRawHeaders(head, d.headers, RESPONSE_REMOVE_OWNED, RESPONSE_ADD_OWNED),
        transforms,
      );
    };
    const fail = (): void => {
      up.destroy();
      writeFailure(res);
    };
    try {
      const decision = runner.onHttpResponse({
        conn: this.conn,
        endpoint: this.policy.endpoint,
        req: this.req,
        res: { status_code: up.statusCode ?? 502, headers: up.headers },
        vars: this.vars,
      });
      settle(decision, apply, fail);
    } catch {
      fail();
    }
  }
}

/** How a request's policy ended, for the two kinds of HTTP request (plain and upgrade). */
interface RequestOutcome {
  forward: (flow: HttpPolicyFlow) => void;
  respond: (decision: RespondDecision) => void;
  /** The request the policy made cannot be written (rewrittenRequest): answer with this page. */
  refuse: (error: IngressError, detail: string) => void;
  close: () => void;
  fail: () => void;
  /** Report the status the client got to these observers (circuit-breaker); plain requests only. */
  observe?: (observers: ReadonlyArray<(status: number) => void>) => void;
}

/**
 * on_tcp_connect (once per connection and policy), then on_http_request, unless the lean relay
 * already decided it for this request (`ahead`, see http-policy-lean.ts).
 */
function runRequestPhases(
  req: IncomingMessage,
  policy: TunnelPolicy,
  outcome: RequestOutcome,
  ahead?: Settled<HttpRequestDecision>,
): void {
  const socket = req.socket;
  const state = connectionState(socket);
  const runner = policy.runner;
  const holder: BodyHolder = { body: undefined };
  const input = requestInputOf(
    req,
    (socket as Partial<TLSSocket>).encrypted === true,
    outcome.observe ? holder : undefined,
  );

  const requestPhase = (vars: PolicyVars): void => {
    if (!runner.policy.has('on_http_request')) {
      outcome.forward(new HttpPolicyFlow(policy, state.conn, input, NO_HEADER_CHANGES, vars));
      return;
    }
    const decided = (d: HttpRequestDecision): void => {
      if (d.kind === 'respond') outcome.respond(d);
      else if (d.kind === 'close') outcome.close();
      else {
        // The ingress writes req.url as the request target, upstream and on upgrades alike: what
        // the policy made of it is checked here, the one place it enters the request.
        const rewritten = rewrittenRequest(d);
        if ('refused' in rewritten) {
          outcome.refuse(rewritten.refused, rewritten.detail);
          return;
        }
        if (rewritten.target !== undefined) req.url = rewritten.target;
        if (d.afterResponse) outcome.observe?.(d.afterResponse);
        outcome.forward(
          new HttpPolicyFlow(
            policy,
            state.conn,
            input,
            d.headers,
            d.vars,
            holder.body,
            d.forwardInternal,
            d.bodyRewrite,
          ),
        );
      }
    };
    settle(
      ahead ??
        runner.onHttpRequest({ conn: state.conn, endpoint: policy.endpoint, req: input, vars }),
      decided,
      outcome.fail,
    );
  };

  const known = state.admitted.get(policy);
  if (known !== undefined || !runner.policy.has('on_tcp_connect')) {
    requestPhase(known ?? Object.freeze({}));
    return;
  }
  // Once per connection and policy: a decision the lean relay asked for is not asked again.
  const decided = state.decided.get(policy);
  state.decided.delete(policy);
  settle(
    decided ?? runner.onTcpConnect({ conn: state.conn, endpoint: policy.endpoint }),
    (d: TcpConnectDecision) => {
      if (d.kind === 'close') {
        outcome.close();
        return;
      }
      state.admitted.set(policy, d.vars);
      requestPhase(d.vars);
    },
    outcome.fail,
  );
}

/**
 * Run a tunnel's policy for a request, then call `forward` with the flow that carries its
 * changes, unless the policy answered (deny, custom-response, redirect, rate-limit, …) or
 * closed the connection. `ahead`: the on_http_request decision the lean relay made for this
 * request before it handed it over, used instead of running the phase again.
 * @example if (tunnel.policy) return runHttpRequestPolicy(req, res, tunnel.policy, (flow) => this.forward(req, res, tunnel, 0, flow));
 */
export function runHttpRequestPolicy(
  req: IncomingMessage,
  res: ServerResponse,
  policy: TunnelPolicy,
  forward: (flow: HttpPolicyFlow) => void,
  ahead?: Settled<HttpRequestDecision>,
): void {
  const drop = (): void => {
    // Nobody will read the rest of the body now; drop it so the answer gets through.
    if (!req.complete) req.resume();
  };
  const outcome: RequestOutcome = {
    forward: (flow) => {
      if (!res.destroyed) forward(flow);
    },
    respond: (d) => {
      drop();
      writeDecision(res, d);
    },
    refuse: (error, detail) => {
      drop();
      if (res.headersSent || res.destroyed) res.destroy();
      else sendErrorPage(req, res, error, routingHost(req.headers.host) ?? '', detail);
    },
    close: () => req.socket.destroy(),
    fail: () => {
      drop();
      writeFailure(res);
    },
    observe: (observers) => {
      res.once('close', () => {
        // A client that left before any answer says nothing about the upstream's health.
        if (!res.headersSent) return;
        for (const observer of observers) observer(res.statusCode);
      });
    },
  };
  try {
    runRequestPhases(req, policy, outcome, ahead);
  } catch {
    outcome.fail();
  }
}

/**
 * The same for an upgrade request (WebSocket): a policy that answers writes a plain HTTP
 * response and ends the socket. Responses to upgrades are relayed unparsed, so on_http_response
 * does not run for them.
 * @example runUpgradePolicy(req, socket, tunnel.policy, (flow) => relayUpgrade(flow));
 */
export function runUpgradePolicy(
  req: IncomingMessage,
  socket: Duplex,
  policy: TunnelPolicy,
  forward: (flow: HttpPolicyFlow) => void,
): void {
  const outcome: RequestOutcome = {
    forward: (flow) => {
      if (!socket.destroyed) forward(flow);
    },
    respond: (d) => socket.end(rawResponse(req, d.status, d.headers, d.body, d.refusal)),
    refuse: (error, detail) =>
      socket.end(rawErrorResponse(error, routingHost(req.headers.host) ?? '', detail)),
    close: () => socket.destroy(),
    fail: () =>
      socket.end(
        rawResponse(req, POLICY_FAILED.status, { 'burrow-error-code': POLICY_FAILED.code }, ''),
      ),
  };
  try {
    runRequestPhases(req, policy, outcome);
  } catch {
    outcome.fail();
  }
}
