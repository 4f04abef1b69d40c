import { describe, expect, it } from 'vitest';
import { endpointTrafficPolicy } from '../../policy/endpoint-flags.js';
import { commandWords, parseSshCommand } from './ssh-command.js';

describe('commandWords', () => {
  it('splits as a shell: quotes keep blanks, backslashes escape', () => {
    expect(
      commandWords(`http --basic-auth 'ops:a b' --request-header-add "x-a:\\"q\\"" c\\ d`),
    ).toEqual(['http', '--basic-auth', 'ops:a b', '--request-header-add', 'x-a:"q"', 'c d']);
    expect(() => commandWords(`http --url 'x`)).toThrow(/quote is not closed/);
  });
});

describe('parseSshCommand', () => {
  it('reads the proto, the url, the policy text and the flags of burrow http', () => {
    const parsed = parseSshCommand(
      "http --url app.example.com --basic-auth ops:correct-horse --cidr-allow=10.0.0.0/8,192.168.0.0/16 --compression --pooling-enabled --traffic-policy '{}'",
    );
    expect(parsed).toEqual({
      proto: 'http',
      url: 'app.example.com',
      trafficPolicy: '{}',
      pooling: true,
      flags: {
        basicAuth: ['ops:correct-horse'],
        cidrAllow: ['10.0.0.0/8,192.168.0.0/16'],
        compression: true,
      },
    });
    // The same translation as the CLI's: one rule per flag, named after it.
    const policy = endpointTrafficPolicy(parsed.flags, 'http', undefined) ?? '';
    expect(JSON.parse(policy)).toMatchObject({
      on_http_request: [{ name: '--cidr-allow' }, { name: '--basic-auth' }],
      on_http_response: [{ name: '--compression' }],
    });
  });

  it('refuses other commands, unknown options, http options on tcp and missing values', () => {
    expect(() => parseSshCommand('')).toThrow(/no command is not http, tcp or tls/);
    expect(() => parseSshCommand('bash -c id')).toThrow(/"bash" is not http, tcp or tls/);
    expect(() => parseSshCommand('http --shell')).toThrow(/--shell: is not an option/);
    expect(() => parseSshCommand('tcp --basic-auth a:bcdefghij')).toThrow(
      /--basic-auth: applies to http tunnels only, not tcp/,
    );
    expect(() => parseSshCommand('http --url')).toThrow(/--url: needs a value/);
    expect(parseSshCommand('tcp --cidr-deny 10.0.0.0/8').flags).toEqual({
      cidrDeny: ['10.0.0.0/8'],
    });
  });
});
