import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import { fuzzRuns, reportFuzz } from '../../test/support/fuzz.js';
import { compilePolicy } from './compile.js';
import { parsePolicyDocument } from './parse.js';

/**
 * Fuzzing the traffic policy parser and compiler: arbitrary text, arbitrary JSON, and documents
 * shaped like policies with arbitrary expressions, action types and configs. Every outcome is a
 * compiled policy or a ValidationError (a 400 with a code); nothing else may be thrown.
 */

const expression = fc.oneof(
  fc.string(),
  fc.constantFrom(
    "req.method == 'GET'",
    "conn.client_ip in ['1.2.3.4']",
    "req.url.path.startsWith('/a')",
    "req.headers['x'][0].matches('^a+$')",
    'size(req.headers) > 3',
    'time.now > timestamp("2020-01-01T00:00:00Z")',
    '((((((((((1))))))))))',
  ),
);
const action = fc.record(
  {
    type: fc.oneof(
      fc.string(),
      fc.constantFrom(
        'deny',
        'custom-response',
        'add-headers',
        'remove-headers',
        'url-rewrite',
        'rate-limit',
        'restrict-ips',
        'log',
        'redirect',
        'forward-internal',
      ),
    ),
    config: fc.jsonValue({ maxDepth: 3 }),
  },
  { requiredKeys: ['type'] },
);
const rule = fc.record(
  {
    name: fc.string(),
    expressions: fc.array(expression, { maxLength: 3 }),
    actions: fc.array(action, { maxLength: 3 }),
  },
  { requiredKeys: [] },
);
const policyDoc = fc
  .record(
    {
      on_http_request: fc.array(rule, { maxLength: 3 }),
      on_http_response: fc.array(rule, { maxLength: 2 }),
      on_tcp_connect: fc.array(rule, { maxLength: 2 }),
      inbound: fc.array(rule, { maxLength: 2 }),
    },
    { requiredKeys: [] },
  )
  .map((doc) => JSON.stringify(doc));

describe('fuzz: traffic policy parser and compiler', () => {
  it('parses and compiles, or refuses with a ValidationError', () => {
    const runs = fuzzRuns(2000, 100_000);
    let compiled = 0;
    fc.assert(
      fc.property(
        fc.oneof(policyDoc, policyDoc, fc.string(), fc.json({ maxDepth: 5 })),
        fc.constantFrom('http', 'https', 'tcp', 'tls'),
        (text, protocol) => {
          try {
            parsePolicyDocument(text, 'policy');
            compilePolicy(text, { protocol, field: 'policy' });
            compiled++;
          } catch (err) {
            expect(err).toBeInstanceOf(ValidationError);
          }
        },
      ),
      { numRuns: runs },
    );
    expect(compiled).toBeGreaterThan(0);
    reportFuzz('traffic policy parser and compiler (src/policy)', runs);
  }, 600_000);
});
