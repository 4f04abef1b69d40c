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
