/**
 * Where an HTTP/2 request the relay routed goes (http-ingress.ts leanRoute): the edge's own
 * answer or page, the policy's answer (a gRPC status to a gRPC client), or an exchange with the
 * agent, over HTTP/1.1 on a tunnel stream (h2-exchange.ts) or as an HTTP/2 call to an endpoint
 * bound with app protocol `http2` (h2-call.ts).
 */
import type { Duplex } from 'node:stream';
import type { Http2ServerRequest, Http2ServerResponse, ServerHttp2Stream } from 'node:http2';
import { clientIp } from '../../registry/connect-tunnel.js';
import { startSpan } from '../../metrics/trace-context.js';
import { grpcRefusal } from '../error-pages.js';
import { isGrpc, respondGrpcH2 } from '../grpc-answers.js';
import type { RespondDecision } from '../../../policy/index.js';
import { H2Call } from './h2-call.js';
import { H2Exchange } from './h2-exchange.js';
import type { H2Upstreams } from './h2-upstream.js';
import { captureAnswer, respondH2, respondPageH2 } from './h2-head.js';
import { beginExchange } from './exchange.js';
import { publicProto } from './http-forwarding.js';
import type { BodyHolder } from './http-policy-body.js';
import type { HttpRelayContext, LeanRouting } from './http-relay.js';
import type { RequestHead } from './request-head.js';

/** An HTTP/2 request the relay's routing took, and how. */
export interface H2Request {
  req: Http2ServerRequest;
  res: Http2ServerResponse;
  /** The public connection. */
  socket: Duplex;
  head: RequestHead;
  host: string;
  route: Exclude<LeanRouting, undefined>;
  /** Its body, when a policy read it whole to decide (body-peek.ts streamBodySource). */
  held: BodyHolder;
}

/** The answer to an extended CONNECT (WebSocket over HTTP/2) for an `http2` endpoint. */
const NO_UPGRADE_TO_HTTP2 = {
  status: 501,
  headers: { 'content-type': 'text/plain; charset=utf-8' },
  body:
    'This endpoint speaks HTTP/2 to its service (app protocol http2), which takes no protocol ' +
    'upgrade: open the WebSocket over HTTP/1.1, or publish the service without app protocol http2.\n',
};

/**
 * Serve an HTTP/2 request the relay's routing took (http-ingress.ts leanRoute): the edge's page,
 * the policy's own answer (a gRPC status to a gRPC client), or the exchange with the agent: in
 * HTTP/1.1 on a tunnel stream (H2Exchange), or as an HTTP/2 call to an endpoint bound with app
 * protocol `http2` (h2-call.ts).
 * @example serveH2(relay.context, upstreams, { req, res, socket, head, host, route, held });
 */
export function serveH2(ctx: HttpRelayContext, upstreams: H2Upstreams, request: H2Request): void {
  const { req, res, socket, head, host, route } = request;
  const grpc = isGrpc(head.contentType);
  if ('edge' in route) {
    respondH2(req.stream, route.edge, head);
    return;
  }
  if ('page' in route) {
    respondPageH2(req.stream, route.page, host, head, route.detail);
    ctx.meters.unrouted.request(route.page.status);
    return;
  }
  const proto = publicProto(socket);
  const ip = clientIp(socket as { remoteAddress?: string });
  // Made only while traces are exported: otherwise the request goes on as it came.
  const span = ctx.tracing() ? startSpan(head.raw) : undefined;
  const start = { head, host, route, scheme: proto, clientIp: ip, span };
  const exchange = beginExchange(ctx, socket, start);
  exchange.heldBody = request.held.body;
  if (route.close) {
    // close-connection closes the connection, every stream of it.
    exchange.count(499, (performance.now() - exchange.started) / 1000);
    exchange.done?.(499, []);
    socket.destroy();
    return;
  }
  const answer = route.answer;
  if (!answer) {
    if (exchange.tunnel.appProtocol === 'http2' && head.upgrade) {
      // An HTTP/2 service takes no HTTP/1.1 upgrade, and its 2xx would read as the tunnel open.
      const raw = respondH2(req.stream, NO_UPGRADE_TO_HTTP2, head);
      exchange.count(NO_UPGRADE_TO_HTTP2.status);
      exchange.done?.(NO_UPGRADE_TO_HTTP2.status, raw);
    } else if (exchange.tunnel.appProtocol === 'http2') {
      new H2Call(ctx, upstreams, req, res, socket, exchange, proto, ip).start();
    } else {
      new H2Exchange(ctx, req, res, socket, exchange, proto, ip).start();
    }
    return;
  }
  const raw =
    grpc && answer.status >= 300
      ? grpcAnswer(req.stream, answer)
      : respondH2(req.stream, answer, head);
  if (!grpc || answer.status < 300) captureAnswer(exchange, answer);
  exchange.count(answer.status, (performance.now() - exchange.started) / 1000);
  if (exchange.state) ctx.connections.countBytes(exchange.state);
  exchange.done?.(answer.status, raw);
}

/** A policy's refusal (deny, basic-auth, jwt-validation, rate-limit…) as a gRPC client reads one. */
function grpcAnswer(stream: ServerHttp2Stream, answer: RespondDecision): string[] {
  const { message, headers } = grpcRefusal(answer);
  return respondGrpcH2(stream, answer.status, message, headers);
}
