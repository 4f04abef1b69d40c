import { describe, expect, it } from 'vitest';
import { compilePolicy } from './compile.js';

/** `CompiledPolicy.readsBody`: what an ingress that reads heads only must not run. */
describe('compilePolicy: readsBody', () => {
  const jwt = (method: string) => `
on_http_request:
  - actions:
      - type: jwt-validation
        config:
          issuer: {allow_list: [{value: "https://id.example/"}]}
          audience: {allow_list: [{value: api}]}
          http: {tokens: [{type: jwt, method: ${method}, name: ${method === 'header' ? 'Authorization, prefix: "Bearer "' : 'token'}}]}
          jws: {allowed_algorithms: [RS256], keys: {sources: {additional_jkus: ["https://id.example/jwks.json"]}}}
`;
  const readsBody = (text: string) => compilePolicy(text, { protocol: 'http' }).readsBody;

  it('is false for head-only policies, true when an action or a variable needs the body', () => {
    expect(
      readsBody('on_http_request: [{actions: [{type: add-headers, config: {headers: {a: b}}}]}]'),
    ).toBe(false);
    expect(readsBody(jwt('header'))).toBe(false);
    expect(readsBody(jwt('body'))).toBe(true);
    expect(
      readsBody(
        'on_http_request: [{actions: [{type: verify-webhook, config: {provider: github, secret: s}}]}]',
      ),
    ).toBe(true);
    expect(
      readsBody(
        'on_http_request: [{expressions: ["size(req.trailers) > 0"], actions: [{type: deny}]}]',
      ),
    ).toBe(true);
  });
});

/** `CompiledPolicy.readsActionResults`: whether the runner records what actions did. */
describe('compilePolicy: readsActionResults', () => {
  const compiled = (text: string) => compilePolicy(text, { protocol: 'http' });
  const ADD = '{type: add-headers, config: {headers: {x-a: "1"}}}';

  it('is false when no expression can read `actions`; when one does, it reads the results', () => {
    expect(compiled(`on_http_request: [{actions: [${ADD}]}]`).readsActionResults).toBe(false);
    const reads = `
on_http_request:
  - actions: [${ADD}]
  - expressions: ["size(actions.ngrok.add_headers.headers_added) == 1"]
    actions: [{type: custom-response, config: {status_code: 200, body: "\${actions.ngrok}"}}]
`;
    const policy = compiled(reads);
    expect(policy.readsActionResults).toBe(true);
    const decision = policy.bind({ ownerId: 'ep_1' }).onHttpRequest({
      conn: { client_ip: '192.0.2.1' },
      req: { method: 'GET', url: '/', headers: {} },
    });
    expect(decision).toMatchObject({
      kind: 'respond',
      body: '{"add_headers":{"headers_added":{"x-a":"1"}}}',
    });
  });
});
