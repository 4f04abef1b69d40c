import { describe, expect, it } from 'vitest';
import { compilePolicy } from './compile.js';

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
