import { describe, expect, it } from 'vitest';
import { BIND_LIMITS, checkBindLimits } from './bind-limits.js';

describe('checkBindLimits', () => {
  const small = { metadata: 'm', forwardsTo: 'localhost:3000' };

  it('lets a session bind up to its tunnel limit, then refuses with ERR_NGROK_324', () => {
    expect(() => checkBindLimits(BIND_LIMITS.maxTunnelsPerSession - 1, small)).not.toThrow();
    expect(() => checkBindLimits(BIND_LIMITS.maxTunnelsPerSession, small)).toThrow(
      expect.objectContaining({ code: 'ERR_NGROK_324' }),
    );
  });

  it('refuses oversized Metadata and ForwardsTo, counting UTF-8 bytes, naming the field', () => {
    const metadata = 'é'.repeat(BIND_LIMITS.maxMetadataBytes / 2 + 1);
    expect(() => checkBindLimits(0, { ...small, metadata })).toThrow(/Metadata is 4098 bytes/);
    const forwardsTo = 'x'.repeat(BIND_LIMITS.maxForwardsToBytes + 1);
    expect(() => checkBindLimits(0, { ...small, forwardsTo })).toThrow(/ForwardsTo is 1025 bytes/);
  });
});
