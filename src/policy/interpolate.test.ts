import { describe, expect, it } from 'vitest';
import { CONN_TLS13, SAMPLE_REQUEST } from '../../test/support/policy-fixtures.js';
import { ExpressionError } from './cel.js';
import { compileTemplate } from './interpolate.js';
import { ConnVars, EndpointVars, ReqVars, TimeVars, type Activation } from './variables.js';

const act: Activation = {
  conn: new ConnVars(CONN_TLS13),
  endpoint: new EndpointVars({ port: 443 }),
  time: new TimeVars(() => 0),
  vars: { tier: 'gold', n: 7n, tags: ['a', 'b'] },
  req: new ReqVars(SAMPLE_REQUEST),
};

const render = (text: string, groups?: string[], maxGroup?: number) =>
  compileTemplate(text, 'on_http_request', maxGroup).render(act, groups);

function refusal(text: string, maxGroup?: number): string {
  try {
    compileTemplate(text, 'on_http_request', maxGroup);
  } catch (err) {
    expect(err).toBeInstanceOf(ExpressionError);
    return (err as Error).message;
  }
  throw new Error(`expected ${text} to be refused`);
}

describe('${} interpolation', () => {
  it('keeps text without interpolations as it is, marked static', () => {
    const t = compileTemplate('plain $ text {}', 'on_tcp_connect');
    expect(t.isStatic).toBe(true);
    expect(t.render(act)).toBe('plain $ text {}');
  });

  it('interpolates expressions of any type as text', () => {
    expect(render('ip=${conn.client_ip} port=${conn.client_port}')).toBe(
      'ip=203.0.113.7 port=51234',
    );
    expect(render('${req.method}${req.url.path}')).toBe('POST/api/v1/users/42');
    expect(render('${vars.tier}/${vars.n}/${vars.tags}')).toBe('gold/7/["a","b"]');
    expect(render('${req.url}')).toBe('https://app.example.com/api/v1/users/42?page=2&page=3');
    expect(render('${conn.client_port > 1024}')).toBe('true');
    expect(render('${time.now}')).toBe('1970-01-01T00:00:00.000Z');
  });

  it('finds the closing brace past quoted braces and map literals', () => {
    expect(render("${'}' + conn.client_ip}")).toBe('}203.0.113.7');
    expect(render("${{'a': 'x{y}'}['a']}!")).toBe('x{y}!');
  });

  it('writes $${ as a literal ${', () => {
    expect(render('cost: $${price}')).toBe('cost: ${price}');
  });

  it('substitutes regex groups only where enabled, and checks their number', () => {
    expect(render('/items/$1/$2', ['/products/5/x', '5', 'x'], 2)).toBe('/items/5/x');
    expect(render('$1${req.method}', ['m', 'g'], 1)).toBe('gPOST');
    expect(render('price $1')).toBe('price $1');
    expect(refusal('/items/$3', 2)).toMatch(
      /\$3 refers to capture group 3, but the from regex has only 2/,
    );
    expect(refusal('/items/$1', 0)).toMatch(/has no groups/);
  });

  it('refuses bad interpolations at compile time', () => {
    expect(refusal('${conn.client_ip')).toMatch(/no closing '}'/);
    expect(refusal('a ${ } b')).toMatch(/empty interpolation/);
    expect(refusal('${conn.nope}')).toMatch(/in \$\{conn.nope\}: No such key: nope/);
    expect(refusal('${res.status_code}')).toMatch(/res is only available in on_http_response/);
  });

  it('throws at render time when an expression fails, for the caller to report', () => {
    const t = compileTemplate("${req.headers['absent'][0]}", 'on_http_request');
    expect(() => t.render(act)).toThrow(/No such key: absent/);
  });
});
