import { once } from 'node:events';
import { connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MuxSession, StreamType, call } from '../../protocol/index.js';
import { startTestAgentEdge, type TestAgentEdge } from '../../../test/support/agent-edge.js';

/** `--agent-proxy-protocol 1`: agents behind a TCP load balancer that sends PROXY v1/v2. */
describe('agent listener with the PROXY protocol', () => {
  let edge: TestAgentEdge;
  let token: string;
  beforeAll(async () => {
    edge = await startTestAgentEdge('sqlite', { proxyProtocol: true, handshakeTimeoutMs: 500 });
    token = await edge.token();
  });
  afterAll(async () => edge.close());

  const dial = async () => {
    const raw = connect({ port: edge.listener.port, host: '127.0.0.1' });
    raw.on('error', () => undefined);
    await once(raw, 'connect');
    return raw;
  };

  it.each([0, 50])(
    'takes the agent address from the header (TLS %i ms later): the session shows the client',
    async (delayMs) => {
      await authenticatedFrom(delayMs);
    },
  );

  async function authenticatedFrom(delayMs: number): Promise<void> {
    const raw = await dial();
    raw.write('PROXY TCP4 203.0.113.50 10.0.0.1 40001 4443\r\n');
    // Later: the header and the ClientHello arrive apart; at once: often in one read.
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    const socket = tlsConnect({ socket: raw, servername: 'localhost', ca: edge.caPem });
    socket.on('error', () => undefined);
    await once(socket, 'secureConnect');
    const mux = new MuxSession(socket, { role: 'client' });
    try {
      const resp = await call(mux, StreamType.Auth, {
        Version: ['3', '2'],
        ClientId: '',
        Extra: { AuthToken: token },
      });
      expect(edge.registry.session(resp.ClientId)?.ip).toBe('203.0.113.50');
    } finally {
      mux.destroy();
    }
  }

  it('closes connections without a header, bad or silent ones, and counts them', async () => {
    const refusals = () => edge.metrics.limitRefusals.with({ limit: 'agent_proxy_protocol' }).value;
    const before = refusals();
    const bare = await dial();
    // A TLS ClientHello where the header should be: refused, never handed to TLS.
    const tls = tlsConnect({ socket: bare, servername: 'localhost', ca: edge.caPem });
    tls.on('error', () => undefined);
    await once(bare, 'close');
    const silent = await dial();
    const started = Date.now();
    await once(silent, 'close');
    expect(Date.now() - started).toBeLessThan(3000);
    expect(refusals()).toBe(before + 2);
    expect(edge.listener.sessions()).toHaveLength(0);
  });
});
