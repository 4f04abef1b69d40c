import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fuzzRuns, reportFuzz } from '../../../../test/support/fuzz.js';
import { bindPolicy, sync } from '../../../../test/support/policy-fixtures.js';
import { normalizeOriginForm } from '../../../core/request-target.js';
import { agentRequestHead } from './exchange.js';
import { parseRequestHead } from './request-head.js';

/**
 * The request target and Host pair, fuzzed: for every pair the lean relay accepts, the path the
 * traffic policy judges (`req.url.raw_path`, through the real policy engine) is the path written
 * to the agent, what is written holds no dot segment (not even once `%2F` is read as a slash), and reading it again changes nothing.
 */

const POLICY = `
on_http_request:
  - actions:
      - type: add-headers
        config: {headers: {x-raw-path: "\${req.url.raw_path}", x-path: "\${req.url.path}"}}
`;
const { runner } = bindPolicy(POLICY, 'http');

const HOSTS = ['a.example', 'A.Example', 'a.example.', 'a.example:8080', 'b.example', '[::1]'];
const segment = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom('admin', 'a', '', '.', '..', '%2e', '%2E', '.%2e', '%2e%2E', '%2f'),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('%41', '%', '%z', '%25', '%2', ';', '\\', '#', '..;', '%5c', '%7E'),
  },
  {
    weight: 2,
    arbitrary: fc.string({
      unit: fc.constantFrom(...'a./%2eEfF?#=&;\\@:'.split('')),
      maxLength: 6,
    }),
  },
);
const path = fc.array(segment, { maxLength: 6 }).map((s) => `/${s.join('/')}`);
const query = fc.constantFrom('', '?', '?a=1', '?a=/../b', '?x=%2e%2e');
const authority = fc.tuple(
  fc.constantFrom('', '', '', 'user@', 'u:p@'),
  fc.constantFrom(...HOSTS, 'a.example', 'a.example', 'a.example:', 'a.example:99999', ''),
);
const target = fc.oneof(
  { weight: 5, arbitrary: fc.tuple(path, query).map(([p, q]) => p + q) },
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.constantFrom('http://', 'https://', 'HTTP://', 'ftp://'), authority, path, query)
      .map(([scheme, [user, host], p, q]) => `${scheme}${user}${host}${p === '/' ? '' : p}${q}`),
  },
  { weight: 1, arbitrary: fc.constantFrom('*', 'a.example:443', 'http:/x', '//a.example/x') },
  { weight: 1, arbitrary: fc.string({ maxLength: 20 }).filter((s) => !/[\s]/.test(s)) },
);

/** The target of a request line written as latin1. */
function writtenTarget(head: string): string {
  const line = head.slice(0, head.indexOf('\r\n'));
  return line.slice(line.indexOf(' ') + 1, line.lastIndexOf(' '));
}

/** The path of a target, once `%2F` counts as a slash: its segments. */
function segmentsOf(raw: string): string[] {
  return raw.replace(/%2f/gi, '/').split('/');
}

describe('fuzz: the request target and Host pair', () => {
  it('the policy judges the path the agent gets, on both HTTP paths', () => {
    const runs = fuzzRuns(3000, 100_000);
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.constantFrom('GET', 'GET', 'POST', 'OPTIONS', 'CONNECT'),
        target,
        fc.constantFrom(...HOSTS, 'a.example', 'a.example'),
        (method, sent, host) => {
          const text = `${method} ${sent} HTTP/1.1\r\nHost: ${host}\r\n\r\n`;
          const head = parseRequestHead(text, { maxHeaderBytes: 16384 });
          if ('status' in head) {
            expect(head.status).toBe(400);
            return;
          }

          const decision = sync(
            runner.onHttpRequest({
              conn: { client_ip: '192.0.2.1' },
              req: { method, url: head.target, headers: { host }, scheme: 'http' },
            }),
          );
          if (decision.kind !== 'continue') throw new Error(`policy answered ${decision.kind}`);
          const seen = new Map(decision.headers.add);
          const written = writtenTarget(agentRequestHead(head, 'http', '192.0.2.1'));
          const writtenPath = written.split('?')[0]!;
          expect(seen.get('x-raw-path')).toBe(writtenPath);
          expect(written).toBe(head.target);
          expect(writtenPath.startsWith('/')).toBe(true);
          // No dot segment, in the text written nor in the path the policy decoded from it.
          for (const s of segmentsOf(writtenPath)) expect(s === '.' || s === '..').toBe(false);
          for (const s of seen.get('x-path')!.split('/'))
            expect(s === '.' || s === '..').toBe(false);
          accepted++;
          expect(normalizeOriginForm(written)).toEqual({ target: written });
        },
      ),
      { numRuns: runs },
    );
    // Not a fuzz of refusals only: a good share of the pairs must reach the policy and the agent.
    expect(accepted).toBeGreaterThan(runs / 5);
    reportFuzz('request target and Host (core/request-target.ts, both HTTP paths)', runs);
  }, 600_000);
});
