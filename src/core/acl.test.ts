import { describe, expect, it } from 'vitest';
import {
  aclPermits,
  aclReadsVault,
  parseAcl,
  parseAclRule,
  type AclRule,
  type BindTarget,
} from './acl.js';

function rules(...text: string[]): AclRule[] {
  const parsed = parseAcl(text);
  if ('error' in parsed) throw new Error(parsed.error);
  return parsed.rules;
}

const domain = (name: string): BindTarget => ({ kind: 'domain', name });
const addr = (host: string, port: number): BindTarget => ({ kind: 'addr', host, port });
const labels = (l: Record<string, string>): BindTarget => ({ kind: 'labels', labels: l });

describe('parseAclRule', () => {
  it.each([
    ['*', { kind: 'any' }],
    ['bind:*', { kind: 'any' }],
    ['bind:foo.example.com', { kind: 'domain', name: 'foo.example.com' }],
    ['bind:Foo.Example.COM', { kind: 'domain', name: 'foo.example.com' }],
    ['bind:localhost', { kind: 'domain', name: 'localhost' }],
    ['bind:*.sitea.example.com', { kind: 'suffix', suffix: 'sitea.example.com' }],
    ['bind:*.SiteA.example.com', { kind: 'suffix', suffix: 'sitea.example.com' }],
    ['bind:1.tcp.ngrok.io:20002', { kind: 'addr', host: '1.tcp.ngrok.io', port: 20002 }],
    ['bind:TCP.Burrow.test:20001', { kind: 'addr', host: 'tcp.burrow.test', port: 20001 }],
    ['bind:127.0.0.1:20000', { kind: 'addr', host: '127.0.0.1', port: 20000 }],
    ['bind:[::1]:20000', { kind: 'addr', host: '[::1]', port: 20000 }],
    ['bind:localhost:20000', { kind: 'addr', host: 'localhost', port: 20000 }],
    ['bind:app=dashboard', { kind: 'label', key: 'app', value: 'dashboard' }],
    ['bind:app=*', { kind: 'label', key: 'app', value: '*' }],
    ['bind:*=example', { kind: 'label', key: '*', value: 'example' }],
    ['bind:*=*', { kind: 'label', key: '*', value: '*' }],
    [
      'bind:k8s.ngrok.com/service=web',
      { kind: 'label', key: 'k8s.ngrok.com/service', value: 'web' },
    ],
  ])('parses %s', (text, expected) => {
    expect(parseAclRule(text)).toEqual(expected);
  });

  it.each([
    ['', /must be '\*' or start with 'bind:'/],
    ['foo.example.com', /must be '\*' or start with 'bind:'/],
    ['BIND:foo.example.com', /must be '\*' or start with 'bind:'/],
    ['bind:', /must name a domain/],
    ['bind:foo', /must name a domain/],
    ['bind: foo.example.com', /must name a domain/],
    ['bind:foo_bar.example.com', /must name a domain/],
    ['bind:*.com', /must name a domain/],
    ['bind:a.*.example.com', /must name a domain/],
    ['bind:*.*.example.com', /must name a domain/],
    ['bind:foo*.example.com', /must name a domain/],
    ['bind:example.com:0', /must name a domain/],
    ['bind:example.com:65536', /must name a domain/],
    ['bind:*:80', /address rule .* must name a host/],
    ['bind:*.example.com:80', /address rule .* must name a host/],
    ['bind:foo bar:80', /address rule .* must name a host/],
    ['bind:[not-ipv6]:80', /must name a domain/],
    ['bind:[1.2.3.4]:80', /address rule .* must name a host/],
    ['bind:=value', /must have the form bind:<key>=<value>/],
    ['bind:key=', /must have the form bind:<key>=<value>/],
    ['bind:a=b=c', /must have the form bind:<key>=<value>/],
    ['bind:app name=x', /label key "app name" may contain only/],
    ['bind:app=a b', /label value "a b" may contain only/],
    ['bind:app*=x', /label key "app\*" may contain only/],
    [`bind:${'k'.repeat(65)}=x`, /label key length is limited to between 1 and 64/],
  ])('refuses %j', (text, message) => {
    const parsed = parseAclRule(text);
    expect(parsed).toHaveProperty('error');
    expect((parsed as { error: string }).error).toMatch(message);
  });
});

describe('parseAcl', () => {
  it('parses every rule in order', () => {
    expect(parseAcl(['bind:a.example.com', 'bind:x=y'])).toEqual({
      rules: [
        { kind: 'domain', name: 'a.example.com' },
        { kind: 'label', key: 'x', value: 'y' },
      ],
    });
  });

  it('reports the index of the first bad rule', () => {
    const parsed = parseAcl(['bind:a.example.com', 'bind:ok=1', 'nope', 'also bad']);
    expect(parsed).toEqual({ index: 2, error: expect.stringContaining("'nope'") });
  });

  it('accepts an empty list', () => {
    expect(parseAcl([])).toEqual({ rules: [] });
  });
});

describe('aclPermits', () => {
  it('permits everything with an empty ACL, including random addresses and labels', () => {
    expect(aclPermits([], domain('anything.example.com'))).toBe(true);
    expect(aclPermits([], addr('tcp.burrow.test', 20001))).toBe(true);
    expect(aclPermits([], { kind: 'random-addr' })).toBe(true);
    expect(aclPermits([], labels({ app: 'x' }))).toBe(true);
  });

  it.each(['*', 'bind:*'])('permits everything with %s', (any) => {
    const acl = rules(any);
    expect(aclPermits(acl, domain('a.example.com'))).toBe(true);
    expect(aclPermits(acl, addr('tcp.burrow.test', 20001))).toBe(true);
    expect(aclPermits(acl, { kind: 'random-addr' })).toBe(true);
    expect(aclPermits(acl, labels({ app: 'x', env: 'prod' }))).toBe(true);
    expect(aclPermits(acl, labels({}))).toBe(true);
  });

  it('matches an exact domain rule only on that name, ignoring case', () => {
    const acl = rules('bind:132.devices.company.com');
    expect(aclPermits(acl, domain('132.devices.company.com'))).toBe(true);
    expect(aclPermits(acl, domain('132.Devices.Company.COM'))).toBe(true);
    expect(aclPermits(acl, domain('133.devices.company.com'))).toBe(false);
    expect(aclPermits(acl, domain('x.132.devices.company.com'))).toBe(false);
    expect(aclPermits(acl, domain('devices.company.com'))).toBe(false);
  });

  it('matches a wildcard rule at any depth and the wildcard name itself, not the bare suffix', () => {
    const acl = rules('bind:*.sitea.example.com');
    expect(aclPermits(acl, domain('dev1.sitea.example.com'))).toBe(true);
    expect(aclPermits(acl, domain('a.b.sitea.example.com'))).toBe(true);
    expect(aclPermits(acl, domain('*.sitea.example.com'))).toBe(true);
    expect(aclPermits(acl, domain('*.x.sitea.example.com'))).toBe(true);
    expect(aclPermits(acl, domain('DEV1.SiteA.example.com'))).toBe(true);
    expect(aclPermits(acl, domain('sitea.example.com'))).toBe(false);
    expect(aclPermits(acl, domain('evilsitea.example.com'))).toBe(false);
    expect(aclPermits(acl, domain('dev1.siteb.example.com'))).toBe(false);
  });

  it('matches address rules on host and port', () => {
    const acl = rules('bind:tcp.burrow.test:20002');
    expect(aclPermits(acl, addr('tcp.burrow.test', 20002))).toBe(true);
    expect(aclPermits(acl, addr('TCP.burrow.test', 20002))).toBe(true);
    expect(aclPermits(acl, addr('tcp.burrow.test', 20003))).toBe(false);
    expect(aclPermits(acl, addr('other.burrow.test', 20002))).toBe(false);
    // An address rule is not a domain rule for the same host, and the reverse.
    expect(aclPermits(acl, domain('tcp.burrow.test'))).toBe(false);
    expect(aclPermits(rules('bind:tcp.burrow.test'), addr('tcp.burrow.test', 20002))).toBe(false);
  });

  it('refuses random TCP addresses whenever the ACL has rules other than allow-all', () => {
    expect(aclPermits(rules('bind:tcp.burrow.test:20002'), { kind: 'random-addr' })).toBe(false);
    expect(aclPermits(rules('bind:*.example.com'), { kind: 'random-addr' })).toBe(false);
  });

  it('requires every label of a labeled tunnel to be permitted', () => {
    const acl = rules('bind:app=dashboard', 'bind:env=*');
    expect(aclPermits(acl, labels({ app: 'dashboard' }))).toBe(true);
    expect(aclPermits(acl, labels({ app: 'dashboard', env: 'prod' }))).toBe(true);
    expect(aclPermits(acl, labels({ app: 'billing' }))).toBe(false);
    expect(aclPermits(acl, labels({ app: 'dashboard', color: 'blue' }))).toBe(false);
  });

  it('lets a wildcard key match any key with that value', () => {
    const acl = rules('bind:*=example');
    expect(aclPermits(acl, labels({ app: 'example', team: 'example' }))).toBe(true);
    expect(aclPermits(acl, labels({ app: 'other' }))).toBe(false);
  });

  it('refuses a labeled tunnel with no labels unless the ACL allows everything', () => {
    expect(aclPermits(rules('bind:app=*'), labels({}))).toBe(false);
  });

  it('does not let label rules permit names or addresses, nor names permit labels', () => {
    const acl = rules('bind:*=*');
    expect(aclPermits(acl, domain('a.example.com'))).toBe(false);
    expect(aclPermits(acl, addr('tcp.burrow.test', 20001))).toBe(false);
    expect(aclPermits(rules('bind:*.example.com'), labels({ app: 'x' }))).toBe(false);
  });

  it('permits when any one rule matches', () => {
    const acl = rules('bind:a.example.com', 'bind:*.b.example.com', 'bind:tcp.burrow.test:20001');
    expect(aclPermits(acl, domain('a.example.com'))).toBe(true);
    expect(aclPermits(acl, domain('x.b.example.com'))).toBe(true);
    expect(aclPermits(acl, addr('tcp.burrow.test', 20001))).toBe(true);
    expect(aclPermits(acl, domain('c.example.com'))).toBe(false);
  });

  it('reads secrets rules as grants only: they neither permit nor restrict binds', () => {
    const onlySecrets = rules('secrets:read:prod');
    expect(onlySecrets).toEqual([{ kind: 'secrets', vault: 'prod' }]);
    expect(aclPermits(onlySecrets, domain('anything.example.com'))).toBe(true);
    expect(aclPermits(onlySecrets, { kind: 'random-addr' })).toBe(true);
    const narrow = rules('bind:leak.example', 'secrets:read:*');
    expect(aclPermits(narrow, domain('leak.example'))).toBe(true);
    expect(aclPermits(narrow, domain('other.example'))).toBe(false);
    expect(aclReadsVault(narrow, 'any vault')).toBe(true);
    expect(aclReadsVault(rules('*'), 'prod')).toBe(false);
    expect(aclReadsVault(onlySecrets, 'prod2')).toBe(false);
    for (const bad of ['secrets:read:', 'secrets:read:a\nb', `secrets:read:${'v'.repeat(256)}`]) {
      expect(parseAclRule(bad)).toMatchObject({
        error: expect.stringMatching(/must name a vault/),
      });
    }
  });
});
