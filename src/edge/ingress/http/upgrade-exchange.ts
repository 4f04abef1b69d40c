/**
 * One upgrade request (`Connection: Upgrade`, `Upgrade: x`) after its endpoint's policy let it
 * through: sent to the agent with Node's http client on a fresh tunnel stream, and judged by the
 * agent's answer. Only a `101 Switching Protocols` makes the connection a raw relay. Any other
 * answer is an ordinary HTTP response (on_http_response runs on it), after which the connection
 * goes back to the full HTTP path: every request pipelined behind the upgrade is read, routed,
 * judged and recorded as any request is; none reaches the agent unjudged.
 *
 * While the answer is awaited, what the client sends next is held (it belongs to the relay after
 * a 101, to the next requests otherwise), and a client that leaves (FIN, RST, an error) releases
 * the stream at once (stream-release.ts).
 */
import { request, ServerResponse, type ClientRequest, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { headersProblem } from '../../../core/http-wire.js';
import { asSocket } from '../../../core/socket-like.js';
import type { EndpointMeter } from '../../metrics/endpoint-meters.js';
import type { CounterSeries } from '../../metrics/metrics.js';
import { connectTunnel } from '../../registry/connect-tunnel.js';
import type { OnlineTunnel, ProxyInfo } from '../../registry/tunnel-registry.js';
import {
  failureDetail,
  INGRESS_ERRORS,
  rawErrorResponse,
  type IngressError,
} from '../error-pages.js';
import type { PublicConnections } from './http-connections.js';
import { carriedBody } from './http-forward-internal.js';
import { forwardResponseHeaders, requestHasBody, routingHost } from './http-forwarding.js';
import type { HttpPolicyFlow } from './http-policy.js';
import { switchProtocols, type RawRelays } from './protocol-switch.js';
import { writeUpstreamResponse } from './http-responses.js';
import { releaseAbandoned, releaseAbandonedRequest, releaseStream } from './stream-release.js';

/** Public bytes held while the agent's answer is awaited, before reads pause. */
const MAX_HELD = 256 * 1024;

/** What every upgrade of one ingress shares. */
export interface UpgradeContext {
  connections: PublicConnections;
  connectTimeoutMs: number | undefined;
  /** Where a connection goes after a 101 (protocol-switch.ts). */
  raw: RawRelays;
  /** Counts streams given up because their client left before the exchange ended. */
  released: CounterSeries;
  /** True once the ingress drains: the connection closes after a non-101 answer. */
  readonly draining: boolean;
  /** Serve the rest of the connection on the full HTTP path; `buffered` was read, not served. */
  handBack(socket: Duplex, buffered: Buffer | undefined): void;
}

/** Where an upgrade goes, and what it carries there. */
export interface UpgradeTarget {
  tunnel: OnlineTunnel;
  /** The endpoints the upgrade went through, this one last; each counts it. */
  meters: readonly EndpointMeter[];
  /** The request head's headers as the agent gets them (checked: safe to write). */
  headers: string[];
  proxyInfo: ProxyInfo;
  flow: HttpPolicyFlow | undefined;
  /** The public socket's error listener, taken off when the connection goes back to HTTP. */
  onSocketError: () => void;
}

const enum Stage {
  /** The agent's answer is awaited; the client's next bytes are held. */
  Waiting,
  /** A non-101 answer is being relayed as an HTTP response. */
  Answering,
  /** A raw relay, an error page, or back on the full HTTP path: nothing more to do here. */
  Done,
}

/**
 * @example new UpgradeExchange(ctx, req, socket, head, target).start();
 */
export class UpgradeExchange {
  private readonly held: Buffer[] = [];
  private heldBytes = 0;
  private upstream: ClientRequest | undefined;
  private stage = Stage.Waiting;
  /** The endpoint that serves the upgrade (the last of `target.meters`). */
  private readonly meter: EndpointMeter;

  constructor(
    private readonly ctx: UpgradeContext,
    private readonly req: IncomingMessage,
    private readonly socket: Duplex,
    head: Buffer,
    private readonly target: UpgradeTarget,
  ) {
    if (head.length > 0) this.hold(head);
    this.meter = target.meters[target.meters.length - 1]!;
  }

  start(): void {
    const { req, socket, target } = this;
    this.ctx.connections.attribute(socket, this.meter);
    socket.on('data', this.hold);
    socket.once('end', this.clientGone);
    socket.once('close', this.clientGone);
    socket.resume();
    let upstream: ClientRequest;
    try {
      upstream = request({
        method: req.method,
        path: req.url,
        headers: target.headers,
        setHost: false,
        createConnection: (_options, done) => {
          connectTunnel(target.tunnel, target.proxyInfo, this.ctx.connectTimeoutMs).then(
            (stream) => {
              if (this.stage === Stage.Waiting) {
                done(null, asSocket(stream));
                return;
              }
              // The client left while the stream opened; the agent may have dialled its service.
              releaseAbandoned(stream, this.ctx.released);
              done(new Error('the client left'), undefined as unknown as Duplex);
            },
            // Node's callback type has no error-only form; the stream is ignored on error.
            (err: unknown) => done(err as Error, undefined as unknown as Duplex),
          );
          return undefined;
        },
      });
    } catch (err) {
      // What reaches here was read by Node's parser and core/request-target.ts, or checked where
      // the policy changed it (http-policy-writes.ts); Node's client, which refuses a target,
      // header name or value it cannot write as it is, is the last word: never crash on it.
      this.refuse(INGRESS_ERRORS.unsafeRequestHead, (err as Error).message);
      return;
    }
    this.upstream = upstream;
    upstream.once('upgrade', this.onSwitch);
    upstream.once('response', this.onResponse);
    upstream.on('error', this.onUpstreamError);
    // A policy action or an earlier endpoint may have read the body whole.
    const readBody = target.flow?.body ?? carriedBody(req);
    if (readBody) upstream.end(readBody);
    else if (requestHasBody(req)) req.pipe(upstream);
    else upstream.end();
  }

  /** Hold what the client sends while the answer is awaited. */
  private readonly hold = (chunk: Buffer): void => {
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes > MAX_HELD) this.socket.pause();
  };

  /** Stop holding and move on to `next`: what was held, in order. */
  private takeHeld(next: Stage): Buffer | undefined {
    const { socket } = this;
    socket.off('data', this.hold);
    socket.off('end', this.clientGone);
    socket.off('close', this.clientGone);
    socket.pause();
    this.stage = next;
    if (this.held.length === 0) return undefined;
    return this.held.length === 1 ? this.held[0] : Buffer.concat(this.held);
  }

  /** The client left (FIN, RST, an error) before the answer: release the stream at once. */
  private readonly clientGone = (): void => {
    if (this.stage !== Stage.Waiting) return;
    this.takeHeld(Stage.Done);
    this.count(499);
    this.abandon();
    this.socket.destroy();
  };

  /** Give the stream up (FIN, then RST) or, not open yet, the request. */
  private abandon(): void {
    if (this.upstream) releaseAbandonedRequest(this.upstream, this.ctx.released);
  }

  private readonly onSwitch = (up: IncomingMessage, stream: Duplex, upHead: Buffer): void => {
    const held = this.takeHeld(Stage.Done);
    const { socket, meter } = this;
    if (socket.destroyed) {
      releaseStream(stream);
      return;
    }
    // The head is written here as it came; it must be writable as it is (no control character).
    const problem = up.statusCode === 101 ? headersProblem(up.rawHeaders) : 'not a 101';
    if (problem) {
      releaseStream(stream);
      this.refuse(INGRESS_ERRORS.unsafeResponseHead, problem);
      return;
    }
    this.count(101);
    switchProtocols(this.ctx.raw, socket, stream, meter, {
      headers: up.rawHeaders,
      fromAgent: upHead,
      fromClient: held,
    });
  };

  private readonly onResponse = (up: IncomingMessage): void => {
    const held = this.takeHeld(Stage.Answering);
    const { req, socket, target } = this;
    const stream = this.upstream?.socket;
    // Without an agent, Node's client keeps a finished stream open: it is released here.
    up.once('close', () => {
      if (stream) releaseStream(stream);
    });
    if (socket.destroyed) {
      this.stage = Stage.Done;
      up.destroy();
      return;
    }
    if (up.statusCode === 101) {
      // A 101 without Upgrade headers: nothing says what the bytes after it are.
      up.destroy();
      this.refuse(INGRESS_ERRORS.tunnelUnreachable, 'a 101 without Connection: Upgrade');
      return;
    }
    const res = new ServerResponse(req);
    res.assignSocket(socket as Socket);
    res.shouldKeepAlive = !this.ctx.draining && !asksToClose(req);
    res.once('finish', () => {
      this.stage = Stage.Done;
      res.detachSocket(socket as Socket);
      this.count(res.statusCode);
      const state = this.ctx.connections.attribute(socket, this.meter);
      if (state) this.ctx.connections.countBytes(state);
      if (!res.shouldKeepAlive || socket.destroyed) {
        socket.end();
        return;
      }
      // Back under HTTP rules: the next request, pipelined or not, is read and judged.
      socket.off('error', target.onSocketError);
      this.ctx.handBack(socket, held);
    });
    res.once('close', () => {
      if (this.stage !== Stage.Answering) return;
      // The client left before the whole answer (499, nginx's convention).
      this.stage = Stage.Done;
      this.count(499);
      this.abandon();
      socket.destroy();
    });
    const headers = forwardResponseHeaders(up);
    const pass = (h: string[], transforms: Parameters<typeof writeUpstreamResponse>[4]): void =>
      writeUpstreamResponse(req, res, up, h, transforms);
    if (target.flow) target.flow.response(up, res, headers, pass);
    else pass(headers, undefined);
  };

  private readonly onUpstreamError = (err: NodeJS.ErrnoException): void => {
    if (this.stage === Stage.Waiting) {
      this.takeHeld(Stage.Done);
      this.refuse(INGRESS_ERRORS.tunnelUnreachable, failureDetail(err));
    } else if (this.stage === Stage.Answering) {
      // After the answer began: the client must see it broken, not short.
      this.stage = Stage.Done;
      this.socket.destroy();
    }
  };

  /** Answer with an error page and close (the caller lets go of the stream, if any). */
  private refuse(error: IngressError, detail: string): void {
    if (this.stage === Stage.Waiting) this.takeHeld(Stage.Done);
    this.stage = Stage.Done;
    this.count(error.status);
    const host = routingHost(this.req.headers.host) ?? '';
    this.socket.end(rawErrorResponse(error, host, detail));
  }

  private count(status: number): void {
    for (const meter of this.target.meters) meter.request(status);
  }
}

/** True when the request's Connection header lists `close`. */
function asksToClose(req: IncomingMessage): boolean {
  const connection = req.headers.connection ?? '';
  return connection.split(',').some((token) => token.trim().toLowerCase() === 'close');
}
