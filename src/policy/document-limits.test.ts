import { describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import {
  POLICY_DOCUMENT_LIMITS,
  policyTextProblem,
  policyValueProblem,
} from './document-limits.js';
import { parsePolicyDocument, parsePolicyValue } from './parse.js';
import { UrlVars } from './variables.js';

const { maxDepth, maxBytes } = POLICY_DOCUMENT_LIMITS;

/** A list nested `n` deep, written as each syntax writes it. */
const nestings = (n: number): [string, string][] => [
  ['JSON lists', '['.repeat(n) + ']'.repeat(n)],
  ['JSON objects', '{"a":'.repeat(n) + '1' + '}'.repeat(n)],
  ['YAML flow mappings', '{a: '.repeat(n) + '1' + '}'.repeat(n)],
  ['YAML compact sequences', '- '.repeat(n) + 'x'],
  [
    'YAML block mappings',
    Array.from({ length: n }, (_, i) => `${' '.repeat(i)}k${i}:`).join('\n') + ' 1',
  ],
];

describe('traffic policy document limits', () => {
  it.each(nestings(maxDepth + 1))('refuses %s one level too deep', (_name, text) => {
    expect(policyTextProblem(text)).toMatch(/more than 32 levels deep/);
  });

  it.each(nestings(maxDepth))('accepts %s exactly at the limit', (_name, text) => {
    expect(policyTextProblem(text)).toBeUndefined();
  });

  it('measures 50,000 levels of text and 100,000 of values without a stack overflow', () => {
    const deep = '['.repeat(50_000) + ']'.repeat(50_000);
    expect(policyTextProblem(deep)).toMatch(/levels deep/);
    const value: unknown[] = [];
    let inner = value;
    for (let i = 0; i < 100_000; i++) inner.push((inner = []));
    expect(policyValueProblem({ inbound: value })).toMatch(/levels deep/);
  });

  it('does not count brackets inside strings, comments or block scalars', () => {
    const brackets = '['.repeat(200);
    const text = [
      `# ${brackets}`,
      'on_http_request:',
      `  - name: "${brackets}"`,
      `    expressions: ['${brackets}' != '']`,
      '    actions:',
      '      - type: custom-response',
      '        config:',
      '          body: |',
      `            ${brackets}`,
    ].join('\n');
    expect(policyTextProblem(text)).toBeUndefined();
  });

  it('refuses a document over the size limit, counting UTF-8 bytes', () => {
    const text = `{"on_http_request": [], "x": "${'é'.repeat(maxBytes / 2)}"}`;
    expect(policyTextProblem(text)).toMatch(/bytes long; the limit is 131072 bytes/);
  });

  it('refuses through the parser with ERR_NGROK_2236 naming the field, and quotes nothing', () => {
    const text = '['.repeat(1000) + ']'.repeat(1000);
    for (let i = 0; i < 3; i++) {
      let thrown: unknown;
      try {
        parsePolicyDocument(text, 'traffic_policy.value');
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(ValidationError);
      expect(thrown).toMatchObject({ code: 'ERR_NGROK_2236', field: 'traffic_policy.value' });
      expect((thrown as Error).message).not.toContain('[[[');
    }
    const deep = JSON.parse('['.repeat(40) + ']'.repeat(40)) as unknown;
    expect(() => parsePolicyValue({ inbound: deep }, 'policy')).toThrow(/levels deep/);
  });
});

describe('what a policy may cost per request', () => {
  it('refuses more than 100 rules in one list, naming the list', () => {
    const rules = Array.from({ length: 101 }, () => ({ actions: [{ type: 'deny' }] }));
    expect(() => parsePolicyValue({ on_http_request: rules }, 'traffic_policy.value')).toThrow(
      /on_http_request has 101 rules; the limit is 100/,
    );
    expect(() =>
      parsePolicyValue({ on_http_request: rules.slice(1) }, 'traffic_policy.value'),
    ).not.toThrow();
  });

  it('shows policies at most 256 query parameters and 32 values of each', () => {
    const query = Array.from({ length: 4000 }, (_, i) => `x=${i}`).join('&');
    const many = new UrlVars('https', 'app.example.com', `/?${query}`).query_params;
    expect(many.get('x')).toHaveLength(32);
    const names = Array.from({ length: 1000 }, (_, i) => `p${i}=1`).join('&');
    expect(new UrlVars('https', 'app.example.com', `/?${names}`).query_params.size).toBe(256);
  });
});
