import { describe, expect, it } from 'vitest';
import {
  domainCovers,
  hostnameProblem,
  isLoopbackHost,
  normalizeName,
  secureOrLoopbackUrl,
} from './hostname.js';

describe('hostnames', () => {
  it('accepts names and wildcards only as the whole first label', () => {
    expect(hostnameProblem('app.example.com', false)).toBeUndefined();
    expect(hostnameProblem('*.sitea.example.com', true)).toBeUndefined();
    expect(hostnameProblem('*.sitea.example.com', false)).toBe('wildcard');
    expect(hostnameProblem('a.*.example.com', true)).toBe('wildcard');
    expect(hostnameProblem('*x.example.com', true)).toBe('wildcard');
    expect(hostnameProblem('*.com', true)).toBe('single-label');
    expect(hostnameProblem('-bad.example.com', false)).toBe('bad-label');
    expect(hostnameProblem('UPPER.example.com', false)).toBe('bad-label');
    expect(hostnameProblem('a'.repeat(64) + '.com', false)).toBe('bad-label');
    expect(hostnameProblem(('a'.repeat(60) + '.').repeat(5) + 'com', false)).toBe('too-long');
    expect(hostnameProblem('localhost', false)).toBe('single-label');
    expect(hostnameProblem('bad domain!', false)).toBe('bad-label');
    expect(hostnameProblem('*', true)).toBe('single-label');
  });

  it('normalizes names: lowercase, one trailing root dot dropped, nothing trimmed', () => {
    expect(normalizeName('App.Example.COM.')).toBe('app.example.com');
    expect(normalizeName('app.example.com')).toBe('app.example.com');
    expect(normalizeName('example.com..')).toBe('example.com.');
    expect(normalizeName(' App.Example.com ')).toBe(' app.example.com ');
    expect(normalizeName('.')).toBe('');
    expect(normalizeName('')).toBe('');
  });

  it('covers names at any depth under a wildcard', () => {
    expect(domainCovers('*.sitea.example.com', 'dev1.sitea.example.com')).toBe(true);
    expect(domainCovers('*.sitea.example.com', 'a.b.sitea.example.com')).toBe(true);
    expect(domainCovers('*.sitea.example.com', 'sitea.example.com')).toBe(false);
    expect(domainCovers('*.sitea.example.com', 'xsitea.example.com')).toBe(false);
    expect(domainCovers('app.example.com', 'app.example.com')).toBe(true);
  });

  it('knows loopback hosts, as listen addresses and as URL hostnames give them', () => {
    for (const host of ['localhost', '127.0.0.1', '127.8.9.10', '::1', '[::1]']) {
      expect(isLoopbackHost(host)).toBe(true);
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'localhost.example.com', '128.0.0.1']) {
      expect(isLoopbackHost(host)).toBe(false);
    }
  });

  it('takes an https URL, or http on loopback, without fragment and (unless allowed) query', () => {
    expect(secureOrLoopbackUrl('https://id.example/realm', false)?.href).toBe(
      'https://id.example/realm',
    );
    expect(secureOrLoopbackUrl('http://127.0.0.1:8080/idp', false)?.port).toBe('8080');
    expect(secureOrLoopbackUrl('http://[::1]/idp', false)).toBeDefined();
    expect(secureOrLoopbackUrl('https://id.example/token?x=1', true)).toBeDefined();
    for (const text of [
      'http://id.example/',
      'https://id.example/?x=1',
      'https://id.example/#top',
      'ftp://127.0.0.1/',
      'not a url',
    ]) {
      expect(secureOrLoopbackUrl(text, false)).toBeUndefined();
    }
  });
});
