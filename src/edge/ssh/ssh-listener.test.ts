import { once } from 'node:events';
import ssh2, { type Client, type ClientChannel } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSdkTestEdge, type SdkTestEdge } from '../../../test/support/sdk-edge.js';
import { startTestSshListener } from '../../../test/support/ssh.js';
import type { ProxyInfo } from '../registry/route.js';
import type { SshListener } from './ssh-listener.js';

/**
 * The SSH listener's limits with ssh2's client on real sockets: forwards per connection, one
 * session channel, failed authentications per address, a command without a forward.
 */

const { utils } = ssh2;

describe('SSH listener limits', () => {
  let edge: SdkTestEdge;
  let ssh: SshListener;
  const known = utils.generateKeyPairSync('ed25519');
  const clients: Client[] = [];

  /** A connected client with `privateKey`; rejects when the connection ends before `ready`. */
  async function connect(privateKey: string): Promise<Client> {
    const client = new ssh2.Client();
    clients.push(client);
    const port = Number(ssh.address.split(':').pop());
    const ready = new Promise<void>((resolve, reject) => {
      client.once('ready', resolve);
      client.once('error', reject);
      client.once('close', () => reject(new Error('closed before ready')));
    });
    client.connect({ host: '127.0.0.1', port, username: 'me', privateKey });
    await ready;
    return client;
  }
  const forwardIn = (client: Client) =>
    new Promise<number>((resolve, reject) =>
      client.forwardIn('localhost', 0, (err, port) => (err ? reject(err) : resolve(port))),
    );
  const exec = (client: Client, command: string) =>
    new Promise<ClientChannel>((resolve, reject) =>
      client.exec(command, (err, channel) => (err ? reject(err) : resolve(channel))),
    );
  async function output(channel: ClientChannel): Promise<{ out: string; err: string }> {
    let out = '';
    let err = '';
    channel.on('data', (d: Buffer) => (out += d.toString()));
    channel.stderr.on('data', (d: Buffer) => (err += d.toString()));
    await once(channel, 'close');
    return { out, err };
  }

  beforeAll(async () => {
    edge = await startSdkTestEdge('sqlite');
    ssh = await startTestSshListener(edge, {
      maxForwardsPerSession: 2,
      maxAuthFailuresPerIpPerMinute: 2,
    });
    await edge.repos.sshCredentials.create({ public_key: known.public });
  });
  afterAll(async () => {
    for (const c of clients) c.end();
    await ssh.close();
    await edge.close();
  });

  it('takes two forwards, refuses a third and a second session channel, and binds both', async () => {
    const client = await connect(known.private);
    await forwardIn(client);
    await forwardIn(client);
    await expect(forwardIn(client)).rejects.toThrow();
    const channel = await exec(client, 'http');
    await expect(exec(client, 'http')).rejects.toThrow();
    let out = '';
    channel.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 5000;
    while ((out.match(/Forwarding https:\/\//g) ?? []).length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(out.match(/Forwarding https:\/\//g)).toHaveLength(2);
    const ssh = edge.registry.listSessions().filter((s) => s.transport === 'ssh');
    expect(ssh).toHaveLength(1);
    expect(edge.registry.listTunnels().filter((t) => t.sessionId === ssh[0]!.id)).toHaveLength(2);
    client.end();
    await once(client, 'close');
  });

  it('takes a cancelled forward offline: out of the registry, its connect() refused at once', async () => {
    const client = await connect(known.private);
    const port = await forwardIn(client);
    const channel = await exec(client, 'http');
    let out = '';
    channel.on('data', (d: Buffer) => (out += d.toString()));
    const deadline = Date.now() + 5000;
    while (!out.includes('Forwarding') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const session = edge.registry.listSessions().find((s) => s.transport === 'ssh')!;
    const tunnel = edge.registry.listTunnels().find((t) => t.sessionId === session.id)!;
    await new Promise<void>((resolve, reject) =>
      client.unforwardIn('localhost', port, (err) => (err ? reject(err) : resolve())),
    );
    expect(edge.registry.tunnel(tunnel.id)).toBeUndefined();
    const info: ProxyInfo = {
      clientAddr: '203.0.113.7:4567',
      proto: 'https',
      edgeType: '',
      passthroughTls: false,
    };
    await expect(tunnel.connect(info)).rejects.toThrow(`tunnel ${tunnel.id} is offline`);
    client.end();
    await once(client, 'close');
  });

  it('tells a command sent before any -R forward to add one', async () => {
    const client = await connect(known.private);
    const channel = await exec(client, 'http');
    const { err } = await output(channel);
    expect(err).toMatch(/no -R forward/);
  });

  it('lets two failed authentications from an address through to their message, not a third', async () => {
    for (let i = 0; i < 2; i++) {
      const stranger = await connect(utils.generateKeyPairSync('ed25519').private);
      const { err } = await output(await exec(stranger, 'http'));
      expect(err).toMatch(/is not an SSH credential of this server/);
    }
    await expect(connect(utils.generateKeyPairSync('ed25519').private)).rejects.toThrow();
    // The address is over its failures, not its keys: a known key still gets in.
    await connect(known.private);
  });
});
