import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type ngrok from '@ngrok/ngrok';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthtoken, startEdgeServer, type EdgeServer } from './support/edge-listeners.js';
import { startHttpUpstream, type LocalServer } from './support/ingress.js';
import {
  jwtValidation,
  testJwtIssuer,
  type JwtTokenSource,
  type TestJwtIssuer,
} from './support/jwt.js';
import { until } from './support/mux.js';
import { connectNgrok } from './support/ngrok-agents.js';
import { spawnBurrow } from './support/server-process.js';
import { connect as connectSdk } from '../src/sdk/index.js';

/**
 * Issue 28: a gRPC service published with the unmodified @ngrok/ngrok's
 * `.appProtocol('http2')`, called through the edge's HTTPS listener by @grpc/grpc-js: the four
 * kinds of call, a 4 MB message, a deadline, a cancelled call, and a jwt-validation refusal that
 * arrives as a gRPC status.
 */

/** Messages are raw bytes: no .proto needed to carry them. */
const bytes = {
  requestSerialize: (b: Buffer) => b,
  requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Buffer) => b,
  responseDeserialize: (b: Buffer) => b,
};
const ECHO = {
  unary: { path: '/test.Echo/Unary', requestStream: false, responseStream: false, ...bytes },
  serverStream: { path: '/test.Echo/List', requestStream: false, responseStream: true, ...bytes },
  clientStream: { path: '/test.Echo/Sum', requestStream: true, responseStream: false, ...bytes },
  bidi: { path: '/test.Echo/Chat', requestStream: true, responseStream: true, ...bytes },
  slow: { path: '/test.Echo/Slow', requestStream: false, responseStream: false, ...bytes },
} satisfies grpc.ServiceDefinition;

const BIG = 16 * 1024 * 1024;
const CHANNEL = {
  'grpc.max_receive_message_length': BIG,
  'grpc.max_send_message_length': BIG,
};

type EchoClient = grpc.Client & {
  unary(
    m: Buffer,
    md: grpc.Metadata,
    o: grpc.CallOptions,
    cb: grpc.requestCallback<Buffer>,
  ): grpc.ClientUnaryCall;
  serverStream(m: Buffer, md?: grpc.Metadata): grpc.ClientReadableStream<Buffer>;
  clientStream(cb: grpc.requestCallback<Buffer>): grpc.ClientWritableStream<Buffer>;
  bidi(): grpc.ClientDuplexStream<Buffer, Buffer>;
  slow(
    m: Buffer,
    md: grpc.Metadata,
    o: grpc.CallOptions,
    cb: grpc.requestCallback<Buffer>,
  ): grpc.ClientUnaryCall;
};

describe('gRPC through the edge, with @ngrok/ngrok appProtocol http2', () => {
  let edge: EdgeServer;
  let server: grpc.Server;
  let session: ngrok.Session;
  let jwks: LocalServer;
  let issuer: TestJwtIssuer;
  let open: EchoClient;
  let guarded: EchoClient;
  let edgeUrl = '';
  let grpcPort = 0;
  const cancelled: string[] = [];

  const clientFor = (url: string): EchoClient => {
    const host = new URL(url).hostname;
    const Client = grpc.makeGenericClientConstructor(ECHO, 'Echo');
    return new Client(
      `127.0.0.1:${edge.ports.https}`,
      grpc.credentials.createSsl(Buffer.from(edge.caPem)),
      { ...CHANNEL, 'grpc.ssl_target_name_override': host, 'grpc.default_authority': host },
    ) as unknown as EchoClient;
  };
  const unary = (
    client: EchoClient,
    m: Buffer,
    md = new grpc.Metadata(),
    o: grpc.CallOptions = {},
  ) =>
    new Promise<Buffer>((resolve, reject) =>
      client.unary(m, md, o, (err, reply) => (err ? reject(err) : resolve(reply!))),
    );

  beforeAll(async () => {
    issuer = await testJwtIssuer();
    jwks = await startHttpUpstream((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(issuer.jwks);
    });
    edge = await startEdgeServer('sqlite', ['--egress-allow', '127.0.0.1']);
    server = new grpc.Server(CHANNEL);
    server.addService(ECHO, {
      unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const who = call.metadata.get('x-forwarded-for').join(',');
        cb(null, Buffer.concat([Buffer.from(`${who}|`), call.request]));
      },
      serverStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
        const n = Number(call.request.toString());
        for (let i = 0; i < n; i++) call.write(Buffer.from(String(i)));
        call.end();
      },
      clientStream: (
        call: grpc.ServerReadableStream<Buffer, Buffer>,
        cb: grpc.sendUnaryData<Buffer>,
      ) => {
        let sum = 0;
        call.on('data', (m: Buffer) => (sum += Number(m.toString())));
        call.on('end', () => cb(null, Buffer.from(String(sum))));
      },
      bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
        call.on('data', (m: Buffer) => call.write(Buffer.from(`echo:${m.toString()}`)));
        call.on('end', () => call.end());
      },
      slow: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const timer = setTimeout(() => cb(null, Buffer.from('late')), 5_000);
        call.on('cancelled', () => {
          clearTimeout(timer);
          cancelled.push(call.request.toString());
        });
      },
    });
    grpcPort = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    session = await connectNgrok(edge.ports, edge.caPem, await createAuthtoken(edge.api));
    const to = `http://127.0.0.1:${grpcPort}`;
    const plain = await session.httpEndpoint().appProtocol('http2').listenAndForward(to);
    const bearer: JwtTokenSource = {
      type: 'jwt',
      method: 'header',
      name: 'Authorization',
      prefix: 'Bearer ',
    };
    const jwksUrl = `http://127.0.0.1:${jwks.port}/jwks.json`;
    const policy = { on_http_request: [{ actions: [jwtValidation(jwksUrl, [bearer])] }] };
    const judged = await session
      .httpEndpoint()
      .appProtocol('http2')
      .trafficPolicy(JSON.stringify(policy))
      .listenAndForward(to);
    open = clientFor(plain.url()!);
    edgeUrl = plain.url()!;
    guarded = clientFor(judged.url()!);
  }, 60_000);

  afterAll(async () => {
    open?.close();
    guarded?.close();
    await session?.close().catch(() => undefined);
    server?.forceShutdown();
    await jwks?.close();
    await edge?.server.stop();
    await edge?.db.drop();
  });

  it('unary: the call and its answer, with the client address the edge saw', async () => {
    const reply = await unary(open, Buffer.from('hello'));
    expect(reply.toString()).toBe('127.0.0.1|hello');
  });

  it('server streaming: every message, in order', async () => {
    const call = open.serverStream(Buffer.from('50'));
    const got: string[] = [];
    call.on('data', (m: Buffer) => got.push(m.toString()));
    await once(call, 'end');
    expect(got).toEqual(Array.from({ length: 50 }, (_, i) => String(i)));
  });

  it('client streaming: the sum of what was sent', async () => {
    const reply = new Promise<Buffer>((resolve, reject) => {
      const call = open.clientStream((err, m) => (err ? reject(err) : resolve(m!)));
      for (let i = 1; i <= 100; i++) call.write(Buffer.from(String(i)));
      call.end();
    });
    expect((await reply).toString()).toBe('5050');
  });

  it('bidirectional streaming: each message answered while the call is open', async () => {
    const call = open.bidi();
    const got: string[] = [];
    for (const word of ['a', 'b', 'c']) {
      call.write(Buffer.from(word));
      const [m] = (await once(call, 'data')) as [Buffer];
      got.push(m.toString());
    }
    call.end();
    await once(call, 'end');
    expect(got).toEqual(['echo:a', 'echo:b', 'echo:c']);
  });

  it('a 4 MB message both ways', async () => {
    const big = Buffer.alloc(4 * 1024 * 1024, 7);
    const reply = await unary(open, big);
    expect(reply.length).toBe(big.length + '127.0.0.1|'.length);
    expect(reply.subarray(-big.length).equals(big)).toBe(true);
  });

  it("a call to a name no endpoint serves is UNAVAILABLE, with the edge's reason", async () => {
    const nowhere = clientFor(
      `https://nothing-here.${new URL(edgeUrl).hostname.split('.').slice(1).join('.')}`,
    );
    const err = (await unary(nowhere, Buffer.from('x')).catch(
      (e: unknown) => e,
    )) as grpc.ServiceError;
    nowhere.close();
    expect(err.code).toBe(grpc.status.UNAVAILABLE);
    expect(err.metadata.get('burrow-error-code')[0]).toMatch(/^ERR_NGROK_/);
  });

  it('a deadline exceeded, and a cancelled call the service hears of', async () => {
    const late = new Promise<grpc.ServiceError>((resolve) =>
      open.slow(
        Buffer.from('deadline'),
        new grpc.Metadata(),
        { deadline: Date.now() + 300 },
        (err) => resolve(err!),
      ),
    );
    expect((await late).code).toBe(grpc.status.DEADLINE_EXCEEDED);

    const stopped = new Promise<grpc.ServiceError>((resolve) => {
      const call = open.slow(Buffer.from('cancel'), new grpc.Metadata(), {}, (err) =>
        resolve(err!),
      );
      setTimeout(() => call.cancel(), 300);
    });
    expect((await stopped).code).toBe(grpc.status.CANCELLED);
    await expect.poll(() => cancelled).toContain('cancel');
  });

  it('a jwt-validation refusal arrives as UNAUTHENTICATED; a valid token goes through', async () => {
    const refused = (await unary(guarded, Buffer.from('x')).catch(
      (e: unknown) => e,
    )) as grpc.ServiceError;
    expect(refused.code).toBe(grpc.status.UNAUTHENTICATED);
    // The edge's own status, with the action's challenge, not grpc-js's reading of an HTTP 401.
    expect(refused.details).toBe('Unauthorized');
    expect(String(refused.metadata.get('www-authenticate')[0])).toMatch(/^Bearer/);

    const token = await issuer.sign();
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    expect((await unary(guarded, Buffer.from('ok'), md)).toString()).toBe('127.0.0.1|ok');
  });

  it('burrow http --app-protocol http2 serves the same calls', async () => {
    const run = spawnBurrow([
      'http',
      String(grpcPort),
      '--app-protocol',
      'http2',
      ...['--server', `127.0.0.1:${edge.ports.agent}`, '--ca', edge.caFile],
      ...['--authtoken', await createAuthtoken(edge.api), '--web-addr', 'false'],
    ]);
    try {
      await until(() => /^Forwarding /m.test(run.stdout()) || run.child.exitCode !== null, 15_000);
      const url = /^Forwarding (\S+)/m.exec(run.stdout())?.[1];
      expect(url, run.stderr()).toBeDefined();
      const client = clientFor(url!);
      expect((await unary(client, Buffer.from('cli'))).toString()).toBe('127.0.0.1|cli');
      client.close();
    } finally {
      run.child.kill();
      await run.exit;
    }
  });

  it("Burrow's SDK: httpEndpoint({ appProtocol: 'http2' }) serves the same calls", async () => {
    const sdk = await connectSdk({
      serverAddr: `127.0.0.1:${edge.ports.agent}`,
      authtoken: await createAuthtoken(edge.api),
      ca: edge.caPem,
    });
    try {
      const endpoint = await sdk.httpEndpoint({
        appProtocol: 'http2',
        forward: `127.0.0.1:${grpcPort}`,
      });
      const client = clientFor(endpoint.url!);
      expect((await unary(client, Buffer.from('sdk'))).toString()).toBe('127.0.0.1|sdk');
      client.close();
    } finally {
      await sdk.close();
    }
  });

  it('burrow http refuses an unknown --app-protocol before connecting', async () => {
    const run = spawnBurrow(['http', '3000', '--app-protocol', 'h3', '--authtoken', 'x']);
    expect(await run.exit).not.toBe(0);
    expect(run.stderr()).toMatch(/--app-protocol "h3": give http1 or http2/);
  });
});
