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
});
