import { describe, expect, it } from 'vitest';
import { AgentApiError } from './errors.js';
import { parseDomain, parseForwardsTo, parseTunnelRequest } from './tunnel-input.js';

function refusal(fn: () => unknown): AgentApiError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AgentApiError);
    return err as AgentApiError;
  }
  throw new Error('expected a refusal');
}

const ADD_HEADERS = {
  inbound: [],
  outbound: [
    {
      expressions: [],
      name: 'Add headers to requests',
      actions: [{ type: 'add-headers', config: { headers: { 'is-ngrok': '0000000000' } } }],
    },
  ],
};

describe('parseForwardsTo', () => {
  it.each([
    ['localhost:8001', 'localhost:8001'],
    [':8001', 'localhost:8001'],
    ['192.168.1.20:80', '192.168.1.20:80'],
    ['[::1]:8080', '[::1]:8080'],
    ['printer.lan:631', 'printer.lan:631'],
    [' :1 ', 'localhost:1'],
    [':65535', 'localhost:65535'],
  ])('accepts %s (connects to %s)', (value, target) => {
    expect(parseForwardsTo(value).target).toBe(target);
  });

  it.each([
    [undefined, /forwards_to: is required/],
    [8001, /must be a string <host>:<port>/],
    ['8001', /must be <host>:<port>/],
    ['localhost', /must be <host>:<port>/],
    ['localhost:0', /the port must be a number from 1 to 65535 \(got '0'\)/],
    ['localhost:65536', /from 1 to 65535 \(got '65536'\)/],
    ['localhost:http', /from 1 to 65535 \(got 'http'\)/],
    ['localhost:', /from 1 to 65535 \(got ''\)/],
    ['http://localhost:8001', /without a scheme/],
    ['[nope]:80', /'\[nope\]' is not an IPv6 address/],
    ['bad_host!:80', /'bad_host!' is not a host name or IP address/],
  ])('refuses %s with a 400 naming the field', (value, message) => {
    const err = refusal(() => parseForwardsTo(value));
    expect(err.status).toBe(400);
    expect(err.field).toBe('forwards_to');
    expect(err.code).toBe('ERR_NGROK_215');
    expect(err.message).toMatch(message);
  });
});

describe('parseDomain', () => {
  it('lower-cases hostnames and tcp addresses', () => {
    expect(parseDomain(' Device1.SiteA.burrow.test ', 'http')).toBe('device1.sitea.burrow.test');
    expect(parseDomain('TCP.burrow.test:20001', 'tcp')).toBe('tcp.burrow.test:20001');
  });

  it.each([
    ['http', undefined, /is required: a hostname under a reserved domain/],
    ['http', 42, /must be a string/],
    ['http', 'device1', /needs at least two labels/],
    ['http', '*.sitea.burrow.test', /cannot be a wildcard/],
    ['http', 'device1.sitea.burrow.test:8443', /without scheme, port or path/],
    ['http', 'https://device1.sitea.burrow.test', /without scheme, port or path/],
    ['tls', 'bad_label.burrow.test', /has a label that is not 1-63 letters/],
    ['tcp', 'tcp.burrow.test', /must be a reserved TCP address <host>:<port>/],
    ['tcp', undefined, /is required: a reserved TCP address/],
  ] as const)('refuses a %s domain %s', (protocol, value, message) => {
    const err = refusal(() => parseDomain(value, protocol));
    expect(err).toMatchObject({ status: 400, field: 'domain', code: 'ERR_NGROK_215' });
    expect(err.message).toMatch(message);
  });
});

describe('parseTunnelRequest', () => {
  it('takes the docs/device-agent.md body, protocol defaulting to http, policy to null', () => {
    expect(
      parseTunnelRequest({ forwards_to: 'localhost:8001', domain: 'device1.sitea.burrow.test' }),
    ).toEqual({
      protocol: 'http',
      forwards_to: 'localhost:8001',
      target: 'localhost:8001',
      domain: 'device1.sitea.burrow.test',
      policy: null,
    });
    const own = parseTunnelRequest({
      protocol: 'http',
      forwards_to: ':8001',
      domain: 'device1.sitea.burrow.test',
      policy: ADD_HEADERS,
    });
    expect(own.policy).toBe(ADD_HEADERS);
  });

  it('accepts tcp and tls, and policy text', () => {
    expect(
      parseTunnelRequest({ protocol: 'tcp', forwards_to: ':22', domain: 'tcp.burrow.test:20001' }),
    ).toMatchObject({ protocol: 'tcp', target: 'localhost:22' });
    expect(
      parseTunnelRequest({
        protocol: 'tls',
        forwards_to: ':443',
        domain: 'db.sitea.burrow.test',
        policy: 'on_tcp_connect:\n  - actions: [{type: deny}]\n',
      }).policy,
    ).toContain('deny');
  });

  it.each([
    [null, 400, 'ERR_NGROK_215', undefined, /the body must be a JSON object/],
    [[1], 400, 'ERR_NGROK_215', undefined, /the body must be a JSON object/],
    [
      { forwards_to: ':1', domain: 'a.b.c', url: 'x' },
      400,
      'ERR_NGROK_214',
      'url',
      /unknown field 'url'/,
    ],
    [
      { protocol: 'udp', forwards_to: ':1', domain: 'a.b.c' },
      400,
      'ERR_NGROK_215',
      'protocol',
      /one of http, tcp, tls/,
    ],
    [{ domain: 'a.b.c' }, 400, 'ERR_NGROK_215', 'forwards_to', /is required/],
    [{ forwards_to: ':1' }, 400, 'ERR_NGROK_215', 'domain', /is required/],
    [
      { forwards_to: ':1', domain: 'a.b.c', policy: [1] },
      400,
      'ERR_NGROK_215',
      'policy',
      /must be a policy object/,
    ],
    [
      {
        forwards_to: ':1',
        domain: 'a.b.c',
        policy: { inbound: [{ actions: [{ type: 'teleport' }] }] },
      },
      400,
      'ERR_NGROK_2201',
      'policy',
      /unknown action type 'teleport'/,
    ],
    [
      {
        forwards_to: ':1',
        domain: 'a.b.c',
        policy: { inbound: [{ expressions: ['req.method =='], actions: [{ type: 'deny' }] }] },
      },
      400,
      'ERR_NGROK_2200',
      'policy',
      /inbound/,
    ],
    [
      { protocol: 'tcp', forwards_to: ':1', domain: 'tcp.burrow.test:20001', policy: ADD_HEADERS },
      400,
      'ERR_NGROK_2230',
      'policy',
      /TCP endpoint only runs on_tcp_connect/,
    ],
    [
      { forwards_to: ':1', domain: 'a.b.c', policy: { rules: [] } },
      400,
      'ERR_NGROK_2236',
      'policy',
      /unknown top-level key 'rules'/,
    ],
  ])('refuses %j', (body, status, code, field, message) => {
    const err = refusal(() => parseTunnelRequest(body));
    expect(err).toMatchObject({ status, code, field });
    expect(err.message).toMatch(message);
    expect(err.body()).toEqual({ error: err.message, code, ...(field ? { field } : {}) });
  });
});
