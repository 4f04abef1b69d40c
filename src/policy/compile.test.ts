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

/** `CompiledPolicy.fixedEdits`: HTTP phases run once, their header edits reused. */
describe('compilePolicy: phases of fixed header edits', () => {
  const compiled = (text: string) => compilePolicy(text, { protocol: 'http' });
  const SECURITY = `
on_http_response:
  - actions:
      - {type: remove-headers, config: {headers: [server, x-powered-by]}}
      - {type: add-headers, config: {headers: {strict-transport-security: "max-age=63072000"}}}
  - actions: [{type: add-headers, config: {headers: {x-frame-options: DENY}}}]
`;
  const response = (runner: ReturnType<ReturnType<typeof compiled>['bind']>, path: string) =>
    runner.onHttpResponse({
      conn: { client_ip: '192.0.2.1' },
      req: { method: 'GET', url: path, headers: {} },
      res: { status_code: 200, headers: ['Server', 'x', 'X-A', '1'] },
    });

  it('takes unconditional add-headers without ${} and remove-headers; the edits are made once', () => {
    const policy = compiled(SECURITY);
    expect([...policy.fixedEdits]).toEqual(['on_http_response']);
    const runner = policy.bind({ ownerId: 'ep_1' });
    const first = response(runner, '/a');
    const second = response(runner, '/b');
    const headers = {
      remove: ['server', 'x-powered-by'],
      add: [
        ['strict-transport-security', 'max-age=63072000'],
        ['x-frame-options', 'DENY'],
      ],
    };
    expect(first).toMatchObject({ kind: 'continue', headers });
    expect(second).toMatchObject({ kind: 'continue', headers });
    // The second decision reuses the first run's edits: the rules were not run again.
    expect((second as { headers: unknown }).headers).toBe((first as { headers: unknown }).headers);
    expect(Object.isFrozen((second as { headers: object }).headers)).toBe(true);
  });

  it('leaves out a phase with a condition, a ${} value, or action results someone reads', () => {
    const conditional = `
on_http_response:
  - expressions: ["res.status_code == 200"]
    actions: [{type: add-headers, config: {headers: {x-ok: "1"}}}]
`;
    expect(compiled(conditional).fixedEdits.size).toBe(0);
    const templated = `
on_http_request:
  - actions: [{type: add-headers, config: {headers: {x-path: "\${req.url.path}"}}}]
`;
    const policy = compiled(templated);
    expect(policy.fixedEdits.size).toBe(0);
    const runner = policy.bind({ ownerId: 'ep_1' });
    const paths = ['/a', '/b'].map((url) => {
      const d = runner.onHttpRequest({
        conn: { client_ip: '192.0.2.1' },
        req: { method: 'GET', url, headers: {} },
      });
      return (d as { headers: { add: ReadonlyArray<readonly [string, string]> } }).headers.add;
    });
    expect(paths).toEqual([[['x-path', '/a']], [['x-path', '/b']]]);
    const results = `${SECURITY}
on_http_request:
  - expressions: ["has(actions.ngrok)"]
    actions: [{type: deny}]
`;
    expect(compiled(results).fixedEdits.size).toBe(0);
  });

  it('answers fixed request edits with the same decision shape as a run', () => {
    const runner = compiled(`
on_http_request:
  - actions: [{type: add-headers, config: {headers: {x-from: edge}}}]
`).bind({ ownerId: 'ep_1' });
    const input = {
      conn: { client_ip: '192.0.2.1' },
      req: { method: 'GET', url: '/', headers: {} },
    };
    const first = runner.onHttpRequest(input);
    const second = runner.onHttpRequest({ ...input, vars: { a: 1 } });
    expect(Object.keys(second as object)).toEqual(Object.keys(first as object));
    expect(second).toMatchObject({ kind: 'continue', headers: { add: [['x-from', 'edge']] } });
    expect((second as { vars: unknown }).vars).toEqual({ a: 1 });
  });
});
