import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  agentConfigPath,
  readAgentConfig,
  resolveTunnelSettings,
  writeAgentConfig,
} from './agent-config.js';

describe('the agent config file', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-agent-config-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('lives under XDG_CONFIG_HOME, else ~/.config', () => {
    expect(agentConfigPath({ XDG_CONFIG_HOME: '/x/cfg', HOME: '/home/me' })).toBe(
      '/x/cfg/burrow/config.yaml',
    );
    expect(agentConfigPath({ HOME: '/home/me' })).toBe('/home/me/.config/burrow/config.yaml');
  });

  it('merges into an existing file, keeps other keys, makes the CA path absolute, mode 0600', () => {
    const path = join(dir, 'burrow', 'config.yaml');
    writeAgentConfig(path, { authtoken: 'first', server_addr: 'a.example.com:4443' });
    writeFileSync(path, readFileSync(path, 'utf8') + 'log_level: debug\n');
    writeAgentConfig(path, { authtoken: 'second', ca: 'relative/ca.pem' });
    expect(readAgentConfig(path)).toEqual({
      authtoken: 'second',
      server_addr: 'a.example.com:4443',
      ca: join(process.cwd(), 'relative/ca.pem'),
    });
    expect(readFileSync(path, 'utf8')).toContain('log_level: debug');
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('reads a missing file as empty and refuses one that is not a mapping', () => {
    expect(readAgentConfig(join(dir, 'none.yaml'))).toEqual({
      authtoken: undefined,
      server_addr: undefined,
      ca: undefined,
    });
    writeFileSync(join(dir, 'list.yaml'), '- a\n- b\n');
    expect(() => readAgentConfig(join(dir, 'list.yaml'))).toThrow(/must hold a YAML mapping/);
  });

  it('resolves flags over environment over file over the default server', () => {
    const file = { authtoken: 'file-token', server_addr: 'file:1', ca: '/file/ca.pem' };
    const env = { BURROW_AUTHTOKEN: 'env-token', BURROW_SERVER_ADDR: 'env:2' };
    expect(resolveTunnelSettings({ authtoken: 'flag-token' }, env, file)).toEqual({
      authtoken: 'flag-token',
      serverAddr: 'env:2',
      ca: '/file/ca.pem',
    });
    expect(resolveTunnelSettings({}, {}, file)).toEqual({
      authtoken: 'file-token',
      serverAddr: 'file:1',
      ca: '/file/ca.pem',
    });
    expect(resolveTunnelSettings({ ca: '/flag.pem' }, { BURROW_CA: '/env.pem' }, {})).toEqual({
      authtoken: undefined,
      serverAddr: '127.0.0.1:4443',
      ca: '/flag.pem',
    });
  });

  it('reads an ngrok.yml: version 2 root_cas, version 3 agent: keys (connect_url, connect_cas, web_addr)', () => {
    writeFileSync(
      join(dir, 'v2.yml'),
      'version: 2\nauthtoken: t2\nserver_addr: e:1\nroot_cas: /ca2.pem\n',
    );
    expect(readAgentConfig(join(dir, 'v2.yml'))).toMatchObject({
      authtoken: 't2',
      server_addr: 'e:1',
      ca: '/ca2.pem',
    });
    writeFileSync(
      join(dir, 'v3.yml'),
      'version: 3\nagent:\n  authtoken: t3\n  connect_url: tls://e:2\n  connect_cas: /ca3.pem\n  web_addr: false\n',
    );
    expect(readAgentConfig(join(dir, 'v3.yml'))).toMatchObject({
      authtoken: 't3',
      server_addr: 'e:2',
      ca: '/ca3.pem',
      web_addr: false,
    });
    writeFileSync(join(dir, 'host.yml'), 'root_cas: host\n');
    expect(readAgentConfig(join(dir, 'host.yml')).ca).toBeUndefined();

    // As burrow start reads them: tls:// dropped from a version 2 server_addr too, and 'trusted'
    // (ngrok's own CA bundle) refused with what to give instead, not ignored.
    writeFileSync(join(dir, 'tls.yml'), 'server_addr: tls://e:3\n');
    expect(readAgentConfig(join(dir, 'tls.yml')).server_addr).toBe('e:3');
    writeFileSync(join(dir, 'trusted.yml'), 'version: 3\nagent:\n  connect_cas: trusted\n');
    expect(() => readAgentConfig(join(dir, 'trusted.yml'))).toThrow(
      /trusted\.yml: connect_cas: 'trusted' means ngrok's own CA bundle.*give 'host'/,
    );
  });
});
