import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgentStartupError } from './errors.js';
import { defaultPolicyFor, loadDefaultPolicy, policyJson } from './policy.js';

/** The test.json of the device-agent walkthrough (docs/device-agent.md, step 6). */
const SAMPLE_TEST_JSON =
  '{"inbound": [], "outbound": [{"expressions": [], "name": "Add headers to requests", "actions": [{"type": "add-headers", "config": {"headers": {"is-ngrok": "0000000000"}}}]}]}';

describe('loadDefaultPolicy', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-agent-policy-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const failure = (path: string, explicit = true): string => {
    try {
      loadDefaultPolicy(path, explicit);
    } catch (err) {
      expect(err).toBeInstanceOf(AgentStartupError);
      return (err as Error).message;
    }
    throw new Error('expected the default policy to be refused');
  };

  it('loads the sample test.json: it applies to http, not to tcp and tls (no HTTP phases there)', () => {
    const path = join(dir, 'test.json');
    writeFileSync(path, SAMPLE_TEST_JSON);
    const policy = loadDefaultPolicy(path, false)!;
    expect(policy.path).toBe(path);
    expect(JSON.parse(policy.json)).toEqual(JSON.parse(SAMPLE_TEST_JSON));
    expect(defaultPolicyFor(policy, 'http')).toBe(policy.json);
    expect(defaultPolicyFor(policy, 'tcp')).toBeUndefined();
    expect(defaultPolicyFor(policy, 'tls')).toBeUndefined();
    expect(policy.unusableOn.tcp).toMatch(/ERR_NGROK_2230|only runs on_tcp_connect/);
  });

  it('applies a connection-level default policy to every protocol, YAML accepted', () => {
    const path = join(dir, 'default.yml');
    writeFileSync(
      path,
      'on_tcp_connect:\n  - expressions: ["conn.client_ip == \'10.0.0.1\'"]\n    actions: [{type: deny}]\n',
    );
    const policy = loadDefaultPolicy(path, true)!;
    expect(policy.unusableOn).toEqual({});
    expect(defaultPolicyFor(policy, 'tls')).toBe(policy.json);
    expect(JSON.parse(policy.json).on_tcp_connect[0].actions).toEqual([{ type: 'deny' }]);
  });

  it('starts without a default policy when the implicit file is missing, refuses a named one', () => {
    const path = join(dir, 'test.json');
    expect(loadDefaultPolicy(path, false)).toBeUndefined();
    expect(failure(path, true)).toMatch(
      new RegExp(`^cannot read the default policy file ${path}: ENOENT`),
    );
    expect(defaultPolicyFor(undefined, 'http')).toBeUndefined();
  });

  it.each([
    ['unparseable', '{"inbound": [', /is not valid JSON or YAML/],
    ['not an object', '[1, 2]', /must hold a policy object/],
    ['empty', '', /must hold a policy object/],
    [
      'invalid',
      '{"inbound":[{"actions":[{"type":"teleport"}]}]}',
      /is not a valid traffic policy: .*unknown action type 'teleport'/,
    ],
  ])('refuses an %s file, naming it, also when it is the implicit one', (_what, text, problem) => {
    const path = join(dir, 'test.json');
    writeFileSync(path, text);
    const message = failure(path, false);
    expect(message).toContain(`the default policy file ${path}`);
    expect(message).toMatch(problem);
  });
});

describe('policyJson', () => {
  it('serialises objects and re-serialises YAML or JSON text as JSON', () => {
    expect(policyJson({ inbound: [] })).toBe('{"inbound":[]}');
    expect(policyJson('inbound: []\noutbound: []\n')).toBe('{"inbound":[],"outbound":[]}');
    expect(policyJson('{ "inbound" : [ ] }')).toBe('{"inbound":[]}');
  });
});
