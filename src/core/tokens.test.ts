import { describe, expect, it } from 'vitest';
import { hashToken, issueToken, redactToken, tokenIdBody, tokenMatches } from './tokens.js';

describe('tokens', () => {
  it('issues <id body>_<secret> and keeps only a hash', () => {
    const id = 'cr_32ELEkz2jOTMtPWtYLYm5yxBjvW';
    const { token, hash } = issueToken(id);
    expect(token).toMatch(/^32ELEkz2jOTMtPWtYLYm5yxBjvW_[0-9A-Za-z]{32}$/);
    expect(hash).toBe(hashToken(token));
    expect(hash).not.toContain(token.slice(28));
    expect(tokenIdBody(token)).toBe('32ELEkz2jOTMtPWtYLYm5yxBjvW');
  });

  it('matches only the exact token', () => {
    const { token, hash } = issueToken('ak_32ELEkz2jOTMtPWtYLYm5yxBjvW');
    expect(tokenMatches(token, hash)).toBe(true);
    expect(tokenMatches(token.slice(0, -1) + (token.endsWith('a') ? 'b' : 'a'), hash)).toBe(false);
    expect(tokenMatches(token, 'not-hex')).toBe(false);
  });

  it('rejects shapes that are not tokens', () => {
    expect(tokenIdBody('hello')).toBeUndefined();
    expect(tokenIdBody('32ELEkz2jOTMtPWtYLYm5yxBjvW_')).toBeUndefined();
  });

  it('redacts for logs', () => {
    expect(redactToken('32ELEkz2jOTMtPWtYLYm5yxBjvW_secretsecret')).toBe('32ELEk…[redacted]');
  });
});
