import { describe, expect, it } from 'vitest';
import {
  formatHostPort,
  hostOf,
  hostOfHostPort,
  parseHostPort,
  splitHostPort,
} from './host-port.js';

describe('parseHostPort', () => {
  it('splits names, IPv4 and bracketed IPv6', () => {
    expect(parseHostPort('tcp.example.com:20001')).toEqual({
      host: 'tcp.example.com',
      port: 20001,
    });
    expect(parseHostPort('127.0.0.1:0')).toEqual({ host: '127.0.0.1', port: 0 });
    expect(parseHostPort('[::1]:443')).toEqual({ host: '::1', port: 443 });
    expect(parseHostPort('[::1]:443', { keepBrackets: true })).toEqual({
      host: '[::1]',
      port: 443,
    });
    expect(parseHostPort('*.example.com:443')).toEqual({ host: '*.example.com', port: 443 });
  });

  it('keeps the port range 0..65535 and minPort', () => {
    expect(parseHostPort('example.com:65535')?.port).toBe(65535);
    expect(parseHostPort('example.com:65536')).toBeUndefined();
    expect(parseHostPort('example.com:123456')).toBeUndefined();
    expect(parseHostPort('example.com:0', { minPort: 1 })).toBeUndefined();
    expect(parseHostPort('example.com:-1')).toBeUndefined();
  });

  it('refuses what is not host:port', () => {
    for (const text of [
      '',
      'example.com',
      ':80',
      '::1:80',
      '[::1]',
      '[zz]:80',
      '[::1]x:80',
      'h:',
      'h:80x',
      'h:+80',
    ]) {
      expect(parseHostPort(text), text).toBeUndefined();
    }
  });

  it('checks the shape only, not whether the host is valid', () => {
    expect(parseHostPort('foo bar:80')).toEqual({ host: 'foo bar', port: 80 });
    expect(parseHostPort('[1.2.3.4]:80', { keepBrackets: true })?.host).toBe('[1.2.3.4]');
  });

  it('with minPort 1 and keepBrackets, as stored hostports want (IPv6 kept in brackets)', () => {
    const stored = { minPort: 1, keepBrackets: true };
    expect(parseHostPort('tcp.example.com:20001', stored)).toEqual({
      host: 'tcp.example.com',
      port: 20001,
    });
    expect(parseHostPort('[::1]:443', stored)).toEqual({ host: '[::1]', port: 443 });
    expect(parseHostPort('example.com', stored)).toBeUndefined();
    expect(parseHostPort('example.com:0', stored)).toBeUndefined();
    expect(parseHostPort('example.com:65536', stored)).toBeUndefined();
  });

  it('allows an absent port or empty host when asked', () => {
    expect(parseHostPort('example.com', { port: 'optional' })).toEqual({
      host: 'example.com',
      port: undefined,
    });
    expect(parseHostPort('[::1]', { port: 'optional' })).toEqual({ host: '::1', port: undefined });
    expect(parseHostPort('example.com:8080', { port: 'optional' })).toEqual({
      host: 'example.com',
      port: 8080,
    });
    expect(parseHostPort(':8080', { allowEmptyHost: true })).toEqual({ host: '', port: 8080 });
  });
});

describe('formatHostPort', () => {
  it('brackets IPv6 only, and round-trips with parseHostPort', () => {
    expect(formatHostPort('example.com', 443)).toBe('example.com:443');
    expect(formatHostPort('::1', 4443)).toBe('[::1]:4443');
    expect(formatHostPort('[::1]', '4443')).toBe('[::1]:4443');
    expect(formatHostPort('::1')).toBe('[::1]');
    expect(formatHostPort('10.0.0.1')).toBe('10.0.0.1');
    for (const text of ['a.example:1', '[2001:db8::1]:80', '10.0.0.1:0']) {
      const hp = parseHostPort(text)!;
      expect(formatHostPort(hp.host, hp.port)).toBe(text);
    }
  });
});

describe('hostOfHostPort', () => {
  it('drops the port and brackets, and returns unparseable text as is', () => {
    expect(hostOfHostPort('App.example.com:8080')).toBe('App.example.com');
    expect(hostOfHostPort('app.example.com')).toBe('app.example.com');
    expect(hostOfHostPort('[::1]:80')).toBe('::1');
    expect(hostOfHostPort('::1:80')).toBe('::1:80');
  });
});

describe('hostOf', () => {
  it('cuts the port off without checking the text, keeping brackets and case', () => {
    expect(hostOf('App.example.com:8080')).toBe('App.example.com');
    expect(hostOf('app.example.com')).toBe('app.example.com');
    expect(hostOf('app.example.com:http')).toBe('app.example.com');
    expect(hostOf('[::1]:80')).toBe('[::1]');
    expect(hostOf('[::1]')).toBe('[::1]');
    expect(hostOf('[::1')).toBe('');
    expect(hostOf('::1')).toBe('');
    expect(hostOf('')).toBe('');
  });
});

describe('splitHostPort', () => {
  it('splits by shape, the port as digits of any value', () => {
    expect(splitHostPort('example.com:99999')).toEqual({ host: 'example.com', port: '99999' });
    expect(splitHostPort('example.com:0080')).toEqual({ host: 'example.com', port: '0080' });
    expect(splitHostPort('[::1]:0')).toEqual({ host: '::1', port: '0' });
    for (const text of ['example.com', 'example.com:http', ':1', '::1:80', 'h:-1']) {
      expect(splitHostPort(text), text).toBeUndefined();
    }
  });
});
