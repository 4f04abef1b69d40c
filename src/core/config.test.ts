import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadServerConfig } from './config.js';

describe('loadServerConfig', () => {
  it('has the defaults of docs/configuration.md', () => {
    const c = loadServerConfig({}, {});
    expect(c).toMatchObject({
      database: '',
      role: 'all',
      apiListen: '127.0.0.1:4000',
      publicApiUrl: 'http://127.0.0.1:4000',
      agentListen: '127.0.0.1:4443',
      httpListen: '127.0.0.1:8080',
      httpsListen: '127.0.0.1:8443',
      baseDomain: 'burrow.localhost',
      tcpHost: 'localhost',
      tcpPorts: { first: 20000, last: 20999 },
    });
    expect(c.dataDir).toMatch(/burrow-data$/);
  });

  it('takes flags over environment over file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-config-'));
    const file = join(dir, 'burrow.yaml');
    writeFileSync(
      file,
      'api-listen: 127.0.0.1:4001\nbase-domain: file.example\ntcp-ports: 30000-30010\n',
    );
    const c = loadServerConfig(
      { 'api-listen': '127.0.0.1:4003', config: file },
      { BURROW_API_LISTEN: '127.0.0.1:4002', BURROW_BASE_DOMAIN: 'env.example' },
    );
    expect(c.apiListen).toBe('127.0.0.1:4003');
    expect(c.baseDomain).toBe('env.example');
    expect(c.tcpPorts).toEqual({ first: 30000, last: 30010 });
  });

  it('names the option and the rule on bad values', () => {
    expect(() => loadServerConfig({ 'tcp-ports': '5-1' }, {})).toThrow(
      new ConfigError(
        'tcp-ports',
        "'5-1' must be a range first-last within 1-65535, e.g. 20000-20999",
      ),
    );
    expect(() => loadServerConfig({ 'api-listen': 'nowhere' }, {})).toThrow(
      /--api-listen: 'nowhere' must be host:port/,
    );
    expect(() => loadServerConfig({ role: 'both' }, {})).toThrow(/--role/);
    expect(() => loadServerConfig({ database: 'mysql://x' }, {})).toThrow(/--database/);
    expect(() => loadServerConfig({ 'api-rate-limit': 'lots' }, {})).toThrow(/--api-rate-limit/);
    expect(() => loadServerConfig({}, { BURROW_LOG_LEVEL: 'loud' })).toThrow(
      "--log-level: 'loud' must be one of fatal, error, warn, info, debug, trace, silent",
    );
  });

  it('reads the header names the traffic inspector redacts, lower-cased', () => {
    expect(loadServerConfig({}, {}).inspectRedactHeaders).toEqual([]);
    const c = loadServerConfig({ 'inspect-redact-header': 'X-Api-Key, x-session' }, {});
    expect(c.inspectRedactHeaders).toEqual(['x-api-key', 'x-session']);
    expect(() => loadServerConfig({ 'inspect-redact-header': 'x-ok,bad name' }, {})).toThrow(
      /^--inspect-redact-header: 'bad name' must be a header name/,
    );
  });

  it('refuses unknown config-file keys', () => {
    const dir = mkdtempSync(join(tmpdir(), 'burrow-config-'));
    const file = join(dir, 'c.yaml');
    writeFileSync(file, 'api_listen: 127.0.0.1:1\n');
    expect(() => loadServerConfig({ config: file }, {})).toThrow(/unknown key 'api_listen'/);
  });

  it('parses the rate limit and lets 0 turn it off', () => {
    expect(loadServerConfig({ 'api-rate-limit': '10/5s' }, {}).apiRateLimit).toEqual({
      max: 10,
      windowSeconds: 5,
    });
    expect(loadServerConfig({ 'api-rate-limit': '0' }, {}).apiRateLimit.max).toBe(0);
  });
});
