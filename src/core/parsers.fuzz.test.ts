import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fuzzRuns, reportFuzz } from '../../test/support/fuzz.js';
import { aclPermits, parseAcl, parseAclRule } from './acl.js';
import { cidrContains, enclosingCidr, formatCidr, parseCidr, parseIp } from './cidr.js';

/** Strings biased towards the parsers' own alphabet, plus anything at all. */
const aclish = fc.oneof(
  fc.string(),
  fc.string({ unit: fc.constantFrom(...'bind:*.=-_aZ09:[]/%'.split('')) }),
  fc
    .tuple(
      fc.constantFrom('bind:', 'bind:*.', '', '*'),
      fc.domain(),
      fc.constantFrom('', ':80', '=x'),
    )
    .map(([a, b, c]) => a + b + c),
);
const cidrish = fc.oneof(
  fc.string(),
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef:./'.split('')) }),
  fc.tuple(fc.ipV4(), fc.integer({ min: -1, max: 40 })).map(([ip, p]) => `${ip}/${p}`),
  fc.tuple(fc.ipV6(), fc.integer({ min: -1, max: 140 })).map(([ip, p]) => `${ip}/${p}`),
);

describe('fuzz: ACL and CIDR parsers', () => {
  it('parseAclRule/parseAcl never throw, and every accepted rule can be checked', () => {
    const runs = fuzzRuns(3000, 200_000);
    fc.assert(
      fc.property(fc.array(aclish, { maxLength: 4 }), fc.domain(), (rules, name) => {
        for (const r of rules) parseAclRule(r);
        const parsed = parseAcl(rules);
        if ('rules' in parsed) {
          aclPermits(parsed.rules, { kind: 'domain', name });
          aclPermits(parsed.rules, { kind: 'labels', labels: { [name]: name } });
          aclPermits(parsed.rules, { kind: 'addr', host: name, port: 80 });
        }
      }),
      { numRuns: runs },
    );
    reportFuzz('ACL parser (src/core/acl.ts)', runs);
  }, 600_000);

  it('parseCidr never throws; an accepted CIDR formats back to itself and contains its network', () => {
    const runs = fuzzRuns(3000, 200_000);
    fc.assert(
      fc.property(cidrish, fc.oneof(fc.ipV4(), fc.ipV6(), fc.string()), (text, ip) => {
        parseIp(text);
        enclosingCidr(text);
        const cidr = parseCidr(text);
        if ('problem' in cidr) return;
        const again = parseCidr(formatCidr(cidr));
        expect(again).toMatchObject({
          family: cidr.family,
          network: cidr.network,
          prefix: cidr.prefix,
        });
        expect(cidrContains(cidr, formatCidr(cidr).split('/')[0]!)).toBe(true);
        cidrContains(cidr, ip);
      }),
      { numRuns: runs },
    );
    reportFuzz('CIDR parser (src/core/cidr.ts)', runs);
  }, 600_000);
});
