import { describe, expect, it } from 'vitest';
import { ID_PREFIX, isId, newId, newIdBody, randomBase62, randomDnsLabel } from './ids.js';

describe('ids', () => {
  it('makes prefix_ + 27 base62 characters', () => {
    const id = newId(ID_PREFIX.tcpEdge);
    expect(id).toMatch(/^edgtcp_[0-9A-Za-z]{27}$/);
    expect(isId(id, 'edgtcp')).toBe(true);
    expect(isId(id, 'edgtls')).toBe(false);
    expect(isId('edgtcp_short', 'edgtcp')).toBe(false);
  });

  it('sorts by creation, byte-wise, even within one millisecond', () => {
    const ids = Array.from({ length: 5000 }, () => newIdBody(1_700_000_000_000));
    const sorted = [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect(sorted).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(newIdBody(1_700_000_000_001) > ids[ids.length - 1]!).toBe(true);
  });

  it('never goes backwards when the clock does', () => {
    const a = newIdBody(1_800_000_000_000);
    const b = newIdBody(1_799_999_999_000);
    expect(b > a).toBe(true);
  });

  it('makes random base62 and DNS labels of the asked length', () => {
    expect(randomBase62(40)).toMatch(/^[0-9A-Za-z]{40}$/);
    expect(randomDnsLabel(13)).toMatch(/^[a-z0-9]{13}$/);
  });
});
