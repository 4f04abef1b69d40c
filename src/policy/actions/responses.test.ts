import { describe, expect, it } from 'vitest';
import {
  bindPolicy,
  CONN_TLS13,
  oneRule,
  SAMPLE_REQUEST,
  sync,
} from '../../../test/support/policy-fixtures.js';
import {
  requestDecision as request,
  responseDecision as response,
} from '../../../test/support/policy-runs.js';
import { inferContentType } from './custom-response.js';

describe('deny', () => {
  it('answers 403 with the refusal of ERR_BURROW_POLICY_DENIED by default on HTTP, and records it', () => {
    const { runner, events, owner } = bindPolicy(
      oneRule('on_http_request', [{ type: 'deny' }]),
      'http',
    );
    expect(sync(runner.onHttpRequest({ conn: CONN_TLS13, req: SAMPLE_REQUEST }))).toEqual({
      kind: 'respond',
      status: 403,
      headers: {},
      body: '',
      refusal: {
        code: 'ERR_BURROW_POLICY_DENIED',
        title: 'Forbidden',
        message: "The endpoint's traffic policy denied this request (a deny rule).",
      },
      vars: {},
    });
    expect(events.eventsFor(owner)[0]).toMatchObject({
      outcome: 'denied',
      metadata: { status_code: 403 },
    });
  });

  it('answers the configured status code', () => {
    expect(request([{ type: 'deny', config: { status_code: 451 } }])).toMatchObject({
      status: 451,
    });
  });

  it.each(['tcp', 'tls', 'http'] as const)(
    'closes the connection in on_tcp_connect (%s)',
    (protocol) => {
      const { runner } = bindPolicy(oneRule('on_tcp_connect', [{ type: 'deny' }]), protocol);
      expect(sync(runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('close');
    },
  );
});

describe('close-connection', () => {
  it('closes without answering, in on_tcp_connect and on_http_request', () => {
    expect(request([{ type: 'close-connection' }])).toEqual({ kind: 'close', vars: {} });
    const { runner, events, owner } = bindPolicy(
      oneRule('on_tcp_connect', [{ type: 'close-connection' }]),
      'tcp',
    );
    expect(sync(runner.onTcpConnect({ conn: CONN_TLS13 })).kind).toBe('close');
    expect(events.eventsFor(owner)[0]!.outcome).toBe('closed');
  });
});

describe('custom-response', () => {
  it('answers 200 by default with the body and an inferred content type', () => {
    expect(request([{ type: 'custom-response', config: { body: 'hello' } }])).toMatchObject({
      kind: 'respond',
      status: 200,
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      body: 'hello',
    });
  });

  it('interpolates body and headers, and keeps a given content type', () => {
    const d = request([
      {
        type: 'custom-response',
        config: {
          status_code: 503,
          body: '{"ip": "${conn.client_ip}"}',
          headers: { 'Content-Type': 'application/problem+json', 'x-path': '${req.url.path}' },
        },
      },
    ]);
    expect(d).toMatchObject({
      status: 503,
      body: '{"ip": "203.0.113.7"}',
      headers: { 'content-type': 'application/problem+json', 'x-path': '/api/v1/users/42' },
    });
  });

  it('accepts the 2024 name content for body', () => {
    expect(request([{ type: 'custom-response', config: { content: '<p>hi</p>' } }])).toMatchObject({
      body: '<p>hi</p>',
      headers: { 'content-type': 'text/html; charset=utf-8' },
    });
  });

  it('replaces the upstream response in on_http_response', () => {
    expect(
      response([
        {
          type: 'custom-response',
          config: { status_code: 502, body: 'hidden ${res.status_code}' },
        },
      ]),
    ).toMatchObject({
      kind: 'respond',
      status: 502,
      body: 'hidden 404',
    });
  });

  it('infers JSON only for text that parses', () => {
    expect(inferContentType(' [1, 2]')).toBe('application/json');
    expect(inferContentType('{not json')).toBe('text/plain; charset=utf-8');
  });
});

describe('redirect', () => {
  it('redirects with 302 to `to` when there is no from', () => {
    expect(
      request([{ type: 'redirect', config: { to: 'https://example.com/${req.method}' } }]),
    ).toEqual({
      kind: 'respond',
      status: 302,
      headers: { location: 'https://example.com/POST' },
      body: '',
      vars: {},
    });
  });

  it('replaces the first match of from in the full URL, with groups', () => {
    const d = request([
      {
        type: 'redirect',
        config: {
          from: '^https://([^/]+)/api/v1/(.*)$',
          to: 'https://$1/v2/$2',
          status_code: 308,
          headers: { 'cache-control': 'no-store' },
        },
      },
    ]);
    expect(d).toMatchObject({
      status: 308,
      headers: {
        location: 'https://app.example.com/v2/users/42?page=2&page=3',
        'cache-control': 'no-store',
      },
    });
  });

  it('continues when from does not match', () => {
    const d = request([
      { type: 'redirect', config: { from: '/nothing-like-this', to: '/x' } },
      { type: 'custom-response', config: { body: 'reached' } },
    ]);
    expect(d).toMatchObject({ kind: 'respond', body: 'reached' });
  });
});
