import { describe, expect, it } from 'vitest';
import { checkAgentOptions, parseListen, type AgentOptions } from './agent.js';
import { AgentStartupError } from './errors.js';

const BASE: AgentOptions = {
  serverAddr: '127.0.0.1:4443',
  authtoken: 'tok',
  ca: undefined,
  listen: '127.0.0.1:8000',
  statePath: 'tunnels.json',
  defaultPolicyPath: 'test.json',
  defaultPolicyExplicit: false,
  expose: undefined,
  apiToken: undefined,
};

describe('parseListen', () => {
  it.each([
    ['127.0.0.1:8000', { host: '127.0.0.1', port: 8000 }],
    ['0.0.0.0:0', { host: '0.0.0.0', port: 0 }],
    ['[::1]:8000', { host: '::1', port: 8000 }],
    ['localhost:9', { host: 'localhost', port: 9 }],
    ['8000', { host: '127.0.0.1', port: 8000 }],
  ])('reads %s', (value, expected) => {
    expect(parseListen(value)).toEqual(expected);
  });

  it.each(['', '127.0.0.1', '127.0.0.1:65536', 'http://127.0.0.1:8000', '127.0.0.1:80x'])(
    'refuses %j naming the flag',
    (value) => {
      expect(() => parseListen(value)).toThrow(AgentStartupError);
      expect(() => parseListen(value)).toThrow(/^--listen must be <host>:<port>/);
    },
  );
});

describe('checkAgentOptions', () => {
  it('accepts the defaults with an authtoken, and --expose with a token', () => {
    expect(() => checkAgentOptions(BASE)).not.toThrow();
    expect(() =>
      checkAgentOptions({ ...BASE, expose: 'agent.sitea.example.com', apiToken: 's3cret' }),
    ).not.toThrow();
  });

  it.each<[string, Partial<AgentOptions>, RegExp]>([
    [
      'no authtoken',
      { authtoken: undefined },
      /^no authtoken: pass --authtoken, set BURROW_AUTHTOKEN/,
    ],
    [
      '--expose without a token',
      { expose: 'agent.sitea.example.com' },
      /^--expose .* needs --api-token <token> \(or BURROW_AGENT_API_TOKEN\)/,
    ],
    ['a bad expose domain', { expose: 'agent', apiToken: 't' }, /^--expose must be a hostname/],
    [
      'a token with spaces',
      { apiToken: 'two words' },
      /^--api-token must be a non-empty token without spaces/,
    ],
    ['an empty token', { apiToken: '' }, /^--api-token must be a non-empty token/],
    [
      'an unreadable CA',
      { ca: '/nonexistent/ca.pem' },
      /^cannot read the CA file \/nonexistent\/ca\.pem: ENOENT/,
    ],
    [
      'an unreadable CA in a list',
      { ca: ['-----BEGIN CERTIFICATE-----\n…', '/nonexistent/b.pem'] },
      /^cannot read the CA file \/nonexistent\/b\.pem: ENOENT/,
    ],
    [
      'a malformed CA fingerprint',
      { caFingerprint: 'sha1:abcd' },
      /^--ca-fingerprint: the CA fingerprint must be a SHA-256 one/,
    ],
  ])('refuses %s', (_what, change, message) => {
    expect(() => checkAgentOptions({ ...BASE, ...change })).toThrow(message);
  });
});
