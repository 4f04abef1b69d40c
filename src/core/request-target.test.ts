import { describe, expect, it } from 'vitest';
import {
  hostName,
  normalizeOriginForm,
  readRequestTarget,
  removeDotSegments,
} from './request-target.js';

/** [method, target, Host header, the origin-form read, or a fragment of the refusal]. */
const TABLE: ReadonlyArray<[string, string, string | undefined, { target: string } | RegExp]> = [
  // origin-form
  ['GET', '/', 'a.example', { target: '/' }],
  ['GET', '/admin?x=1&y=%2e', 'a.example', { target: '/admin?x=1&y=%2e' }],
  ['GET', '//admin', 'a.example', { target: '//admin' }],
  // absolute-form: http, https, with port, upper-case scheme and host, no path, query only
  ['GET', 'http://a.example/admin', 'a.example', { target: '/admin' }],
  ['GET', 'https://a.example/admin?q=1', 'a.example', { target: '/admin?q=1' }],
  ['GET', 'HTTP://A.Example:8080/admin', 'a.example:8080', { target: '/admin' }],
  ['GET', 'http://a.example:9999/admin', 'a.example', { target: '/admin' }],
  ['GET', 'http://a.example.', 'A.EXAMPLE', { target: '/' }],
  ['GET', 'http://a.example?x=1', 'a.example', { target: '/?x=1' }],
  ['GET', 'http://[::1]:80/x', '[::1]', { target: '/x' }],
  // absolute-form refused: another host, userinfo, another scheme, no host
  ['GET', 'http://b.example/secret', 'a.example', /host is not the Host header/],
  ['GET', 'http://user:pw@a.example/admin', 'a.example', /userinfo/],
  ['GET', 'http://a.example@b.example/admin', 'a.example', /userinfo/],
  ['GET', 'ftp://a.example/admin', 'a.example', /scheme ftp/],
  ['GET', 'http:///admin', 'a.example', /without a valid host/],
  ['GET', 'http://a.example:port/', 'a.example', /without a valid host/],
  // authority-form and asterisk-form
  ['CONNECT', 'a.example:443', 'a.example', /CONNECT/],
  ['GET', 'a.example:443', 'a.example', /neither a path nor/],
  ['OPTIONS', '*', 'a.example', /asterisk-form/],
  // dot segments, plain and percent-encoded (either case)
  ['GET', '/./admin', 'a.example', { target: '/admin' }],
  ['GET', '/x/../admin', 'a.example', { target: '/admin' }],
  ['GET', '/../../admin', 'a.example', { target: '/admin' }],
  ['GET', '/%2e/admin', 'a.example', { target: '/admin' }],
  ['GET', '/x/%2E%2e/admin', 'a.example', { target: '/admin' }],
  ['GET', '/x/.%2e/admin?a=/../b', 'a.example', { target: '/admin?a=/../b' }],
  ['GET', 'https://a.example/x/%2e%2e/admin', 'a.example', { target: '/admin' }],
  ['GET', '/admin/.', 'a.example', { target: '/admin/' }],
  ['GET', '/admin/..', 'a.example', { target: '/' }],
  ['GET', '/a/.../b', 'a.example', { target: '/a/.../b' }],
  // encoded unreserved characters are decoded, others kept as sent
  ['GET', '/%61dmin', 'a.example', { target: '/admin' }],
  ['GET', '/a%20b%3F', 'a.example', { target: '/a%20b%3F' }],
  // encoded slashes: kept, unless they would make a dot segment
  ['GET', '/admin%2fsecret', 'a.example', { target: '/admin%2fsecret' }],
  ['GET', '/a%2F..%2Fadmin', 'a.example', /encoded slash/],
  ['GET', '/a/..%2fadmin', 'a.example', /encoded slash/],
  ['GET', '/a%2f.', 'a.example', /encoded slash/],
  // what services would read in another way
  ['GET', '/admin#x', 'a.example', /fragment/],
  ['GET', '/public\\..\\admin', 'a.example', /backslash/],
  ['GET', '/a%zz', 'a.example', /percent-encoding/],
  ['GET', '/a%2', 'a.example', /percent-encoding/],
  ['GET', '/a\r\nX: y', 'a.example', /control character/],
  ['GET', '/a b', 'a.example', /control character/],
];

describe('readRequestTarget: one reading of the request target', () => {
  it.each(TABLE)('%s %s (Host %s)', (method, target, host, expected) => {
    const read = readRequestTarget(method, target, host);
    if (expected instanceof RegExp) {
      expect(read).toEqual({ problem: expect.stringMatching(expected) });
    } else {
      expect(read).toEqual(expected);
      // Reading what was read changes nothing: the rewrite check and the relay agree.
      expect(normalizeOriginForm(expected.target)).toEqual(expected);
    }
  });

  it('accepts an absolute-form target without a Host header (routing then asks for one)', () => {
    expect(readRequestTarget('GET', 'http://a.example/x', undefined)).toEqual({ target: '/x' });
  });
});

describe('removeDotSegments (RFC 3986 §5.2.4)', () => {
  it.each([
    ['/a/b/c/./../../g', '/a/g'],
    ['/mid/content=5/../6', '/mid/6'],
    ['/a//../b', '/a/b'],
    ['/a/./', '/a/'],
    ['/..', '/'],
    ['/', '/'],
  ])('%s is %s', (path, expected) => {
    expect(removeDotSegments(path)).toBe(expected);
  });
});

describe('hostName', () => {
  it('is the routing name: lower case, no port, no trailing dot, IPv6 in brackets', () => {
    expect(hostName('App.Example.COM.:8443')).toBe('app.example.com');
    expect(hostName('[::1]:80')).toBe('[::1]');
  });
});
