import { describe, expect, it } from 'vitest';
import { SAMPLE_REQUEST } from '../../../test/support/policy-fixtures.js';
import {
  requestDecision as request,
  responseDecision as response,
} from '../../../test/support/policy-runs.js';
import type { RequestInput, ResponseInput } from '../variables.js';
import { chooseEncoding } from './compress-response.js';

describe('add-headers', () => {
  it('adds interpolated request headers, lower-cased', () => {
    expect(
      request([
        {
          type: 'add-headers',
          config: { headers: { 'X-Client-IP': '${conn.client_ip}', 'x-n': 2 } },
        },
      ]),
    ).toMatchObject({
      kind: 'continue',
      headers: {
        remove: [],
        add: [
          ['x-client-ip', '203.0.113.7'],
          ['x-n', '2'],
        ],
      },
    });
  });

  it('replaces host instead of adding a second one', () => {
    expect(
      request([{ type: 'add-headers', config: { headers: { host: 'internal.local' } } }]),
    ).toMatchObject({
      headers: { remove: ['host'], add: [['host', 'internal.local']] },
    });
  });

  it('adds response headers in on_http_response', () => {
    expect(
      response([
        { type: 'add-headers', config: { headers: { 'x-status': '${res.status_code}' } } },
      ]),
    ).toMatchObject({
      kind: 'continue',
      headers: { remove: [], add: [['x-status', '404']] },
      compress: undefined,
    });
  });
});

describe('remove-headers', () => {
  it('removes request headers, dropping adds of the same name made before', () => {
    expect(
      request([
        { type: 'add-headers', config: { headers: { 'x-a': '1', 'x-b': '2' } } },
        { type: 'remove-headers', config: { headers: ['X-A', 'user-agent'] } },
      ]),
    ).toMatchObject({ headers: { remove: ['x-a', 'user-agent'], add: [['x-b', '2']] } });
  });

  it('removes response headers', () => {
    expect(response([{ type: 'remove-headers', config: { headers: ['server'] } }])).toMatchObject({
      headers: { remove: ['server'], add: [] },
    });
  });
});

describe('compress-response', () => {
  const req = (acceptEncoding: string | undefined, method = 'GET'): RequestInput => ({
    ...SAMPLE_REQUEST,
    method,
    headers: { ...SAMPLE_REQUEST.headers, 'accept-encoding': acceptEncoding },
  });
  const res = (headers: ResponseInput['headers'] = {}, status = 200): ResponseInput => ({
    status_code: status,
    headers: { 'content-type': 'application/json', 'content-length': '900', ...headers },
  });
  const compress = { type: 'compress-response' };

  it('picks the encoding the client prefers and sets the headers', () => {
    expect(response([compress], req('gzip, br;q=0.5'), res())).toMatchObject({
      kind: 'continue',
      compress: 'gzip',
      headers: {
        remove: ['content-length', 'content-encoding'],
        add: [
          ['content-encoding', 'gzip'],
          ['vary', 'Accept-Encoding'],
        ],
      },
    });
  });

  it('offers only the configured algorithms', () => {
    expect(
      response(
        [{ type: 'compress-response', config: { algorithms: ['deflate'] } }],
        req('br, gzip, deflate'),
        res(),
      ),
    ).toMatchObject({ compress: 'deflate' });
  });

  it.each([
    ['no accept-encoding', req(undefined), res()],
    ['an encoded response', req('gzip'), res({ 'content-encoding': 'br' })],
    ['no-transform', req('gzip'), res({ 'cache-control': 'public, no-transform' })],
    ['a 304', req('gzip'), res({}, 304)],
    ['a HEAD request', req('gzip', 'HEAD'), res()],
  ])('leaves the response alone for %s', (_what, request, upstream) => {
    expect(response([compress], request, upstream)).toMatchObject({
      compress: undefined,
      headers: { remove: [], add: [] },
    });
  });

  it('chooses by q-value, then br > gzip > deflate, honouring * and q=0', () => {
    const all = ['br', 'gzip', 'deflate'] as const;
    expect(chooseEncoding('gzip, deflate, br', all)).toBe('br');
    expect(chooseEncoding('gzip;q=1, br;q=0.8', all)).toBe('gzip');
    expect(chooseEncoding('*', ['gzip', 'deflate'])).toBe('gzip');
    expect(chooseEncoding('*, br;q=0', all)).toBe('gzip');
    expect(chooseEncoding('identity', all)).toBeUndefined();
    expect(chooseEncoding('gzip;q=0', all)).toBeUndefined();
  });
});
