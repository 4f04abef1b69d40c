import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadServerConfig } from './config.js';
import { DEFAULT_LIMITS, LIMIT_OPTIONS } from './limits.js';

describe('limit options', () => {
  it('have defaults, flags and BURROW_* variables, and refuse values out of bounds', () => {
    expect(loadServerConfig({}, {}).limits).toEqual(DEFAULT_LIMITS);
    const set = loadServerConfig(
      { 'max-header-count': '50' },
      { BURROW_AGENT_MAX_CONNECTIONS: '7' },
    );
    expect(set.limits).toMatchObject({ maxHeaderCount: 50, agentMaxConnections: 7 });
    expect(() => loadServerConfig({ 'max-header-count': '1' }, {})).toThrow(/--max-header-count/);
    expect(() => loadServerConfig({ 'headers-timeout-ms': 'soon' }, {})).toThrow(/whole number/);
    expect(new Set(LIMIT_OPTIONS.map((o) => o.field)).size).toBe(LIMIT_OPTIONS.length);
  });

  it('set the agent and API limits from flags and variables', () => {
    const set = loadServerConfig(
      { 'agent-max-frame-bytes': '65536', 'api-max-json-depth': '8' },
      { BURROW_AGENT_MAX_TUNNELS_PER_SESSION: '3', BURROW_AGENT_PROXY_PROTOCOL: '1' },
    );
    expect(set.limits).toMatchObject({
      agentMaxFrameBytes: 65536,
      apiMaxJsonDepth: 8,
      agentMaxTunnelsPerSession: 3,
      agentProxyProtocol: 1,
    });
    // Beyond what muxado's 24-bit length can say.
    expect(() => loadServerConfig({ 'agent-max-frame-bytes': String(2 ** 24) }, {})).toThrow(
      /--agent-max-frame-bytes/,
    );
  });

  it('are each a row, with their default, of the one limits table in docs/security.md', () => {
    const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
    for (const o of LIMIT_OPTIONS) {
      const row = doc.split('\n').find((l) => l.startsWith(`| \`--${o.name}\` |`));
      expect(row, o.name).toBeDefined();
      expect(row!.split('|')[2]!.trim().split(' ')[0]!.replace(/,/g, ''), o.name).toBe(o.default);
    }
  });

  it('are each a row of docs/configuration.md with their environment variable and default', () => {
    const doc = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    for (const o of LIMIT_OPTIONS) {
      const env = `BURROW_${o.name.toUpperCase().replace(/-/g, '_')}`;
      expect(doc, o.name).toContain(`| \`--${o.name}\` | \`${env}\` | \`${o.default}\` |`);
    }
  });
});
