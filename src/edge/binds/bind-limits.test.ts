import { describe, expect, it } from 'vitest';
import { AGENT_FIELD_LIMITS, agentFieldProblem } from '../../protocol/index.js';
import { BIND_LIMITS, checkBindLimits } from './bind-limits.js';

describe('checkBindLimits', () => {
  it('lets a session bind up to its tunnel limit, then refuses with ERR_NGROK_324', () => {
    expect(() => checkBindLimits(BIND_LIMITS.maxTunnelsPerSession - 1)).not.toThrow();
    expect(() => checkBindLimits(BIND_LIMITS.maxTunnelsPerSession)).toThrow(
      expect.objectContaining({ code: 'ERR_NGROK_324' }),
    );
  });
});

describe('agentFieldProblem: one table of field limits for every message', () => {
  const over = (field: keyof typeof AGENT_FIELD_LIMITS) =>
    'x'.repeat(AGENT_FIELD_LIMITS[field] + 1);

  it('holds Metadata to 4 KiB in Auth, Bind, StartTunnelWithLabel and PatchTunnelState alike', () => {
    const metadata = over('Metadata');
    expect(agentFieldProblem('Auth', { Extra: { Metadata: metadata } })).toBe(
      'Auth: Extra.Metadata is 4097 bytes; the limit is 4096',
    );
    expect(agentFieldProblem('Bind', { Extra: { Metadata: metadata } })).toMatch(
      /Bind: Extra.Metadata is 4097 bytes/,
    );
    expect(agentFieldProblem('StartTunnelWithLabel', { Metadata: metadata })).toMatch(
      /StartTunnelWithLabel: Metadata is 4097 bytes/,
    );
    expect(agentFieldProblem('PatchTunnelState', { Metadata: metadata })).toMatch(
      /PatchTunnelState: Metadata is 4097 bytes; the limit is 4096/,
    );
    expect(agentFieldProblem('PatchTunnelState', { Metadata: 'x'.repeat(4096) })).toBeUndefined();
  });

  it('counts UTF-8 bytes, not characters, and names the field', () => {
    const metadata = 'é'.repeat(AGENT_FIELD_LIMITS.Metadata / 2 + 1);
    expect(agentFieldProblem('Bind', { Extra: { Metadata: metadata } })).toMatch(
      /Extra.Metadata is 4098 bytes/,
    );
    expect(agentFieldProblem('Bind', { ForwardsTo: over('ForwardsTo') })).toMatch(
      /Bind: ForwardsTo is 1025 bytes; the limit is 1024/,
    );
    expect(agentFieldProblem('Bind', { Id: over('Id') })).toMatch(/Bind: Id is 257 bytes/);
    expect(agentFieldProblem('Unbind', { Id: over('Id') })).toMatch(/Unbind: Id is 257 bytes/);
  });

  it('leaves values that are not text, and messages without such fields, to their own checks', () => {
    expect(agentFieldProblem('Bind', { Extra: { Metadata: 12 } })).toBeUndefined();
    expect(agentFieldProblem('Bind', { Extra: null })).toBeUndefined();
    expect(agentFieldProblem('SrvInfo', { Metadata: over('Metadata') })).toBeUndefined();
  });
});
