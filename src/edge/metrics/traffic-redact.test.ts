import { describe, expect, it } from 'vitest';
import { CredentialRedactor, hidden, redactValue } from './traffic-redact.js';

describe('redactValue', () => {
  it.each([
    ['authorization', 'Bearer secret', 'Bearer [redacted, 6 chars]'],
    ['authorization', 'basic dXNlcjpzZWNyZXQ=', 'basic [redacted, 16 chars]'],
    [
      'proxy-authorization',
      'Digest username="a", response="secret"',
      'Digest [redacted, 31 chars]',
    ],
    // An unknown first word may be the credential itself: nothing of it is shown.
    ['authorization', 'secret', '[redacted, 6 chars]'],
    ['authorization', 'secret more', '[redacted, 11 chars]'],
    ['cookie', 'sid=secret', 'sid=[redacted, 6 chars]'],
    ['cookie', 'sid=secret; theme=dark', 'sid=[redacted, 6 chars]; theme=[redacted, 4 chars]'],
    ['cookie', 'secret', '[redacted, 6 chars]'],
    ['cookie', 'a b=secret', '[redacted, 10 chars]'],
    [
      'set-cookie',
      'sid=secret; Path=/; HttpOnly; SameSite=Lax; Token=secret2',
      'sid=[redacted, 6 chars]; Path=/; HttpOnly; SameSite=Lax; Token=[redacted, 7 chars]',
    ],
    ['x-api-key', 'secret', '[redacted, 6 chars]'],
  ])('%s: %s', (name, value, shown) => {
    expect(redactValue(name, value)).toBe(shown);
    expect(shown).not.toContain('secret');
  });
});

describe('CredentialRedactor', () => {
  const redactor = new CredentialRedactor(['X-Api-Key']);

  it('redacts request headers in any case and leaves the others as they came', () => {
    const raw = [
      'Host',
      'a.test',
      'AUTHORIZATION',
      'Bearer secret',
      'cookie',
      'sid=secret',
      'x-api-key',
      'secret',
      'Proxy-Authorization',
      'Basic secret',
      'X-Other',
      'secret is fine here',
    ];
    expect(redactor.rawHeaders(raw)).toEqual([
      'Host',
      'a.test',
      'AUTHORIZATION',
      'Bearer [redacted, 6 chars]',
      'cookie',
      'sid=[redacted, 6 chars]',
      'x-api-key',
      hidden(6),
      'Proxy-Authorization',
      'Basic [redacted, 6 chars]',
      'X-Other',
      'secret is fine here',
    ]);
    expect(raw[3]).toBe('Bearer secret');
  });

  it('returns the same array when nothing is redacted', () => {
    const raw = ['Host', 'a.test', 'Accept', '*/*'];
    expect(redactor.rawHeaders(raw)).toBe(raw);
  });

  it('redacts response headers, each Set-Cookie of several', () => {
    expect(
      redactor.rawHeaders([
        ...['Set-Cookie', 'a=secret; Path=/', 'set-cookie', 'b=secret'],
        ...['X-Api-Key', 'secret', 'Content-Type', 'text/plain', 'Content-Length', '5'],
      ]),
    ).toEqual([
      ...['Set-Cookie', 'a=[redacted, 6 chars]; Path=/', 'set-cookie', 'b=[redacted, 6 chars]'],
      ...['X-Api-Key', hidden(6), 'Content-Type', 'text/plain', 'Content-Length', '5'],
    ]);
  });

  it('knows the names it redacts', () => {
    expect(redactor.redacts('Set-Cookie')).toBe(true);
    expect(redactor.redacts('X-API-KEY')).toBe(true);
    expect(redactor.redacts('x-api-keys')).toBe(false);
    expect(new CredentialRedactor().redacts('x-api-key')).toBe(false);
  });
});
