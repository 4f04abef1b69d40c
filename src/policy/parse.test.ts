import { describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import { TLS_SAMPLE_POLICY } from '../../test/support/policy-fixtures.js';
import { parsePolicyDocument, parsePolicyValue, ruleLabel, toPhases } from './parse.js';

const FIELD = 'traffic_policy.value';

/** The parser's error for `text`, so tests can check code, field and message together. */
function errorOf(text: string): ValidationError {
  try {
    parsePolicyDocument(text, FIELD);
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(text)} to be refused`);
}

describe('parsePolicyDocument: accepted documents', () => {
  it('reads the legacy JSON sample, normalising a missing config to null', () => {
    expect(parsePolicyDocument(TLS_SAMPLE_POLICY, FIELD)).toEqual({
      format: 'legacy',
      inbound: [
        {
          name: 'AllowTLS1.3',
          expressions: ['conn.TLS.Version.contains("1.3")'],
          actions: [
            {
              type: 'log',
              config: {
                metadata: {
                  message: 'Invalid TLS Version',
                  edgeId: 'edgtls_2bhsNc9X6FO3i2wzTOgIH8jAe52',
                },
              },
            },
            { type: 'deny', config: null },
          ],
        },
      ],
      outbound: [],
    });
  });

  it('reads the phase form in YAML, with comments, and fills absent lists with []', () => {
    const yaml = [
      '# block a known address, tag everything else',
      'on_tcp_connect:',
      '  - name: Block IP',
      '    expressions: ["conn.client_ip == \'192.0.2.0\'"]',
      '    actions:',
      '      - type: deny',
      'on_http_response:',
      '  - actions:',
      '      - type: add-headers',
      '        config:',
      '          headers:',
      '            is-burrow: "0000000000"',
    ].join('\n');
    expect(parsePolicyDocument(yaml, FIELD)).toEqual({
      format: 'phases',
      on_tcp_connect: [
        {
          name: 'Block IP',
          expressions: ["conn.client_ip == '192.0.2.0'"],
          actions: [{ type: 'deny', config: null }],
        },
      ],
      on_http_request: [],
      on_http_response: [
        {
          expressions: [],
          actions: [{ type: 'add-headers', config: { headers: { 'is-burrow': '0000000000' } } }],
        },
      ],
    });
  });

  it('reads the same policy identically from JSON and YAML', () => {
    const json =
      '{"on_http_request":[{"name":"r","expressions":["true"],"actions":[{"type":"log","config":{"metadata":{"n":1,"ok":true,"tags":["a"]}}}]}]}';
    const yaml = `on_http_request:
  - name: r
    expressions:
      - "true"
    actions:
      - type: log
        config: {metadata: {n: 1, ok: true, tags: [a]}}
`;
    expect(parsePolicyDocument(yaml, FIELD)).toEqual(parsePolicyDocument(json, FIELD));
  });

  it('accepts null lists and null expressions/config, as the API itself returns them', () => {
    const doc = parsePolicyDocument(
      '{"inbound":[{"name":"x","expressions":null,"actions":[{"type":"deny","config":null}]}],"outbound":null}',
      FIELD,
    );
    expect(doc).toEqual({
      format: 'legacy',
      inbound: [{ name: 'x', expressions: [], actions: [{ type: 'deny', config: null }] }],
      outbound: [],
    });
  });

  it('treats {} as a phase-form policy with no rules', () => {
    expect(parsePolicyDocument('{}', FIELD)).toEqual({
      format: 'phases',
      on_tcp_connect: [],
      on_http_request: [],
      on_http_response: [],
    });
  });

  it('takes already-parsed values through parsePolicyValue', () => {
    const doc = parsePolicyValue({ outbound: [{ actions: [{ type: 'log' }] }] }, 'policy');
    expect(doc).toEqual({
      format: 'legacy',
      inbound: [],
      outbound: [{ expressions: [], actions: [{ type: 'log', config: null }] }],
    });
  });
});

describe('parsePolicyDocument: refused documents', () => {
  it.each([
    ['an empty text', '   \n', /traffic policy is empty/],
    ['a list', '[1, 2]', /must be a mapping .* not a list/],
    ['a scalar', '"deny everything"', /must be a mapping .* not a string/],
    ['null', 'null', /must be a mapping .* not null/],
  ])('refuses %s as a non-mapping (2236)', (_what, text, message) => {
    const err = errorOf(text);
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.statusCode).toBe(400);
    expect(err.field).toBe(FIELD);
    expect(err.message).toMatch(message);
    expect(err.message.startsWith(`${FIELD}: `)).toBe(true);
  });

  it('reports JSON syntax errors with line and column', () => {
    const err = errorOf('{\n  "inbound": [\n    {"actions": [}\n  ]\n}');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(
      /^traffic_policy\.value: cannot parse the traffic policy as JSON or YAML: .*line 3, column \d+/,
    );
  });

  it('reports YAML syntax errors with line and column', () => {
    const err = errorOf('on_http_request:\n  - actions:\n\t- type: deny\n');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(/Tabs are not allowed as indentation at line 3, column 1/);
  });

  it('refuses duplicate keys instead of keeping the last', () => {
    const err = errorOf('{"inbound": [], "inbound": [{"actions":[{"type":"deny"}]}]}');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(/Map keys must be unique at line 1/);
  });

  it('refuses several YAML documents in one text', () => {
    expect(errorOf('inbound: []\n---\noutbound: []\n').message).toMatch(/multiple documents/);
  });

  it('refuses alias bombs as unparseable rather than expanding them', () => {
    let text = 'a: &a [x, x, x, x, x, x, x, x, x]\n';
    let prev = 'a';
    for (let i = 0; i < 8; i++) {
      text += `b${i}: &b${i} [${Array(9).fill(`*${prev}`).join(', ')}]\n`;
      prev = `b${i}`;
    }
    const err = errorOf(text);
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(/Excessive alias count/);
  });

  it('refuses unknown top-level keys, listing the accepted ones', () => {
    const err = errorOf('{"on_http_requests": []}');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toBe(
      "traffic_policy.value: unknown top-level key 'on_http_requests'; a traffic policy has the lists on_tcp_connect, on_http_request, on_http_response (or the older inbound, outbound)",
    );
  });

  it('refuses mixing the legacy and phase forms', () => {
    const err = errorOf('{"inbound": [], "on_http_response": []}');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(
      /mixes the older lists \(inbound\) with phases \(on_http_response\); use one form/,
    );
  });

  it('refuses a list that is not a list', () => {
    const err = errorOf('on_tcp_connect: {actions: []}');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toBe(
      'traffic_policy.value: on_tcp_connect must be a list of rules, not a mapping',
    );
  });

  it('refuses a rule that is not a mapping, naming its index', () => {
    const err = errorOf('{"outbound": ["deny"]}');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(
      /^traffic_policy\.value: outbound\[0\] must be a rule: .* not a string \("deny"\)$/,
    );
  });

  it('quotes long values only in part', () => {
    const err = errorOf(JSON.stringify({ inbound: ['x'.repeat(500)] }));
    expect(err.message).toMatch(/not a string \("x{56}\.\.\.\)$/);
  });

  it('refuses a rule without actions (2206), naming index and name', () => {
    const doc = {
      on_http_request: [
        { name: 'Allow', actions: [{ type: 'log' }] },
        { name: 'Block bots', expressions: ['req.user_agent.is_bot'], actions: [] },
      ],
    };
    const err = errorOf(JSON.stringify(doc));
    expect(err.code).toBe('ERR_NGROK_2206');
    expect(err.message).toBe(
      'traffic_policy.value: on_http_request[1] ("Block bots"): actions must be a non-empty list; a rule needs at least one action',
    );
    expect(errorOf('inbound:\n  - name: x\n').code).toBe('ERR_NGROK_2206');
    expect(errorOf('inbound:\n  - actions: {type: deny}\n').code).toBe('ERR_NGROK_2206');
  });

  it('refuses unknown rule keys', () => {
    const err = errorOf(
      'inbound:\n  - name: r\n    action: [{type: deny}]\n    actions: [{type: deny}]\n',
    );
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(
      /inbound\[0\] \("r"\): unknown key 'action'; a rule has the keys name, expressions, actions/,
    );
  });

  it('refuses a name that is not a string', () => {
    const err = errorOf('inbound:\n  - name: [a]\n    actions: [{type: deny}]\n');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(/inbound\[0\]: name must be a string, not a list/);
  });

  it('refuses expressions that are not a list of non-empty strings (2200)', () => {
    const single = errorOf(
      'on_tcp_connect:\n  - expressions: "true"\n    actions: [{type: deny}]\n',
    );
    expect(single.code).toBe('ERR_NGROK_2200');
    expect(single.message).toMatch(
      /on_tcp_connect\[0\]: expressions must be a list of CEL expressions/,
    );
    const number = errorOf(
      'on_tcp_connect:\n  - name: n\n    expressions: ["true", 1]\n    actions: [{type: deny}]\n',
    );
    expect(number.code).toBe('ERR_NGROK_2200');
    expect(number.message).toMatch(
      /on_tcp_connect\[0\] \("n"\): expressions\[1\] must be a non-empty CEL expression string, not a number \(1\)/,
    );
    expect(errorOf('inbound: [{expressions: [" "], actions: [{type: deny}]}]').code).toBe(
      'ERR_NGROK_2200',
    );
  });

  it('refuses an action that is not a mapping', () => {
    const err = errorOf('inbound: [{name: r, actions: [deny]}]');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(/inbound\[0\] \("r"\)\.actions\[0\] must be a mapping with a type/);
  });

  it('refuses an action without a usable type (2201)', () => {
    const missing = errorOf('inbound: [{actions: [{config: {}}]}]');
    expect(missing.code).toBe('ERR_NGROK_2201');
    expect(missing.message).toMatch(
      /inbound\[0\]\.actions\[0\]: type must be a non-empty string naming the action \(e\.g\. "deny"\), not missing/,
    );
    expect(errorOf('inbound: [{actions: [{type: ""}]}]').code).toBe('ERR_NGROK_2201');
    expect(errorOf('inbound: [{actions: [{type: 3}]}]').code).toBe('ERR_NGROK_2201');
  });

  it('refuses unknown action keys', () => {
    const err = errorOf('inbound: [{actions: [{type: deny, conf: {}}]}]');
    expect(err.code).toBe('ERR_NGROK_2236');
    expect(err.message).toMatch(
      /inbound\[0\]\.actions\[0\]: unknown key 'conf'; an action has the keys type, config/,
    );
  });

  it('refuses a config that is not a mapping (2203)', () => {
    const err = errorOf(
      'on_http_request: [{name: h, actions: [{type: add-headers, config: [a]}]}]',
    );
    expect(err.code).toBe('ERR_NGROK_2203');
    expect(err.message).toBe(
      'traffic_policy.value: on_http_request[0] ("h").actions[0] (add-headers): config must be a mapping of the action\'s settings, not a list',
    );
  });

  it('refuses config numbers JSON cannot hold (YAML .inf / .nan)', () => {
    const err = errorOf(
      'on_http_request: [{actions: [{type: rate-limit, config: {limits: [1, .inf]}}]}]',
    );
    expect(err.code).toBe('ERR_NGROK_2203');
    expect(err.message).toMatch(/\(rate-limit\): config\.limits\[1\] must be a finite number/);
  });
});

describe('toPhases', () => {
  const legacy = parsePolicyDocument(
    'inbound: [{name: in, actions: [{type: deny}]}]\noutbound: [{name: out, actions: [{type: log}]}]',
    FIELD,
  );

  it('maps inbound to on_http_request for HTTP and outbound to on_http_response', () => {
    const phases = toPhases(legacy, 'http');
    expect(phases.on_tcp_connect).toEqual([]);
    expect(phases.on_http_request).toEqual([
      {
        name: 'in',
        expressions: [],
        actions: [{ type: 'deny', config: null }],
        source: { list: 'inbound', index: 0 },
      },
    ]);
    expect(phases.on_http_response.map((r) => [r.name, r.source])).toEqual([
      ['out', { list: 'outbound', index: 0 }],
    ]);
  });

  it.each(['tcp', 'tls'] as const)('maps inbound to on_tcp_connect for %s', (protocol) => {
    const phases = toPhases(legacy, protocol);
    expect(phases.on_tcp_connect.map((r) => r.name)).toEqual(['in']);
    expect(phases.on_http_request).toEqual([]);
    // Kept, not dropped: the validator refuses phases a protocol cannot run (2230).
    expect(phases.on_http_response.map((r) => r.name)).toEqual(['out']);
  });

  it('keeps phase documents as they are, recording where each rule came from', () => {
    const doc = parsePolicyDocument(
      'on_tcp_connect: [{actions: [{type: deny}]}, {name: b, actions: [{type: log}]}]',
      FIELD,
    );
    const phases = toPhases(doc, 'tcp');
    expect(phases.on_tcp_connect.map((r) => r.source)).toEqual([
      { list: 'on_tcp_connect', index: 0 },
      { list: 'on_tcp_connect', index: 1 },
    ]);
    expect(toPhases(doc, 'http').on_tcp_connect).toHaveLength(2);
  });
});

describe('ruleLabel', () => {
  it('names a rule by list and index, adding its name when it has one', () => {
    expect(ruleLabel('on_http_request', 1, { name: 'Block bots' })).toBe(
      'on_http_request[1] ("Block bots")',
    );
    expect(ruleLabel('inbound', 0, {})).toBe('inbound[0]');
    expect(ruleLabel('inbound', 2, { name: '' })).toBe('inbound[2]');
  });
});
