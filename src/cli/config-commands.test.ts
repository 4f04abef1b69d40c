import { describe, expect, it } from 'vitest';
import { mergeConfigSources, parseConfigText } from '../agent/ngrok-config.js';
import { upgradeConfigText } from './config-commands.js';

describe('burrow config upgrade', () => {
  it('moves a version 2 file to version 3 with the same session and tunnels', async () => {
    const v2 = [
      'version: 2',
      'authtoken: tok',
      'server_addr: edge.example.com:4443',
      'root_cas: /etc/burrow/ca.pem',
      'web_addr: 127.0.0.1:4100',
      'region: eu',
      'tunnels:',
      '  web: {proto: http, addr: 3000, basic_auth: ["ops:correct-horse"]}',
      '',
    ].join('\n');
    const text = await upgradeConfigText(v2, 'ngrok.yml');
    expect(text).toBeDefined();
    const before = mergeConfigSources([parseConfigText(v2, 'ngrok.yml')]);
    const after = mergeConfigSources([parseConfigText(text!, 'ngrok.yml')]);
    expect(after.version).toBe(3);
    expect(after).toMatchObject({
      authtoken: 'tok',
      serverAddr: 'edge.example.com:4443',
      caFile: '/etc/burrow/ca.pem',
      webAddr: '127.0.0.1:4100',
    });
    expect(after.tunnels).toEqual(before.tunnels);
    expect(text).toMatch(
      /^agent:\n {2}authtoken: tok\n {2}connect_url: edge\.example\.com:4443\n/m,
    );
  });

  it('leaves a version 3 file alone and refuses a file with a bad key', async () => {
    await expect(
      upgradeConfigText('version: 3\nagent: {authtoken: x}\n', 'a.yml'),
    ).resolves.toBeUndefined();
    await expect(upgradeConfigText('version: 2\nproxy_url: http://p\n', 'b.yml')).rejects.toThrow(
      'b.yml:2 (proxy_url): proxy_url is not supported',
    );
  });
});
