import { quote, shorten } from '../../core/quote.js';
import {
  enclosingCidr,
  formatCidr,
  ipInCidr,
  parseCidr,
  parseCidrCached,
  parseIp,
  type Cidr,
  type ParsedIp,
} from '../../core/cidr.js';
import { CODES } from '../../core/errors.js';
import { ID_PREFIX, isId } from '../../core/ids.js';
import type { IpPolicyRule } from '../events.js';
import type { ConfigReader } from './config.js';
import {
  CLOSE,
  type ActionOutcome,
  type ActionSpec,
  type PhaseContext,
  type Terminal,
} from './types.js';

/** What a refused client reads: the error page of ERR_BURROW_IP_RESTRICTED. */
const IP_REFUSAL = Object.freeze({
  code: CODES.ipRestricted,
  title: 'Forbidden',
  message:
    "Your address may not reach this endpoint: its traffic policy lets only some client addresses through (restrict-ips, an IP policy, or the agent's --cidr-allow/--cidr-deny).",
});

/**
 * Why a policy naming IP policies that do not exist is refused, for a bind and
 * `POST /traffic_policy/validate` alike.
 * @example missingIpPoliciesMessage(['ipp_1']) // 'restrict-ips names IP policies that do not exist: ipp_1. …'
 */
export function missingIpPoliciesMessage(missing: readonly string[]): string {
  return `restrict-ips names IP policies that do not exist: ${missing.join(', ')}. Create them with POST /ip_policies, or remove them from ip_policies.`;
}

/** An IP policy rule's block, parsed once; a broken stored rule matches nothing. */
function ruleCidr(text: string): Cidr | null {
  const parsed = parseCidrCached(text);
  return 'problem' in parsed ? null : parsed;
}

function cidrList(config: ConfigReader, key: 'allow' | 'deny'): Cidr[] {
  const list = config.stringList(key, { min: 0, max: 1000 }) ?? [];
  return list.map((text, i) => {
    const parsed = parseCidr(text.trim());
    if (!('problem' in parsed)) return parsed;
    const at = `${key}[${i}]`;
    if (parsed.problem === 'missing-mask') {
      config.fail(
        at,
        `is an address, not a CIDR block: write ${shorten(text)}/${text.includes(':') ? 128 : 32} for this one address`,
      );
    }
    if (parsed.problem === 'not-network-address') {
      config.fail(
        at,
        `is not the first address of its block: did you mean ${enclosingCidr(text)}?`,
      );
    }
    return config.fail(
      at,
      `is not a CIDR block like 192.0.2.0/24 or 2001:db8::/32: ${quote(text, '"')}`,
    );
  });
}

/** Whether the address may pass, and the block that decided it (none: no allow block matched). */
interface IpVerdict {
  ok: boolean;
  matched: Cidr | undefined;
}

/**
 * Whether `ip` may pass: it matches no deny block and, when there are allow blocks, one of them.
 * @example allowed(parseIp('10.1.2.3')!, [cidr('10.0.0.0/8')], []) // { ok: true, matched: 10.0.0.0/8 }
 */
function allowed(
  ip: ParsedIp | undefined,
  allow: readonly Cidr[],
  deny: readonly Cidr[],
): IpVerdict {
  if (!ip) return { ok: false, matched: undefined };
  for (const block of deny) if (ipInCidr(ip, block)) return { ok: false, matched: block };
  if (allow.length === 0) return { ok: true, matched: undefined };
  for (const block of allow) if (ipInCidr(ip, block)) return { ok: true, matched: block };
  return { ok: false, matched: undefined };
}

/** `actions.ngrok.restrict_ips`: as ngrok's action variables name them. */
function publishResult(
  c: PhaseContext,
  verdict: IpVerdict | undefined,
  error?: { code: string; message: string },
): void {
  c.setActionResult('restrict_ips', {
    action: verdict?.ok ? 'allow' : 'deny',
    matched_cidr: verdict?.matched ? formatCidr(verdict.matched) : '',
    ...(error && { error }),
  });
}

/**
 * `restrict-ips`: let a client through only when its address matches an `allow` block (or there
 * are none) and no `deny` block. `ip_policies` adds the rules of IP policies (`ipp_…`, resolved at
 * run time, so editing a policy's rules applies at once): their allow rules join `allow`, their
 * deny rules join `deny`. Refused: HTTP 403 with the error page of ERR_BURROW_IP_RESTRICTED, or
 * the connection closed in on_tcp_connect. With `enforce: false` refusals are only recorded as
 * events. If the IP policies cannot be read, the client is refused.
 * @example { type: 'restrict-ips', config: { allow: ['192.0.2.0/24'], ip_policies: ['ipp_…'] } }
 */
export const restrictIpsAction: ActionSpec = {
  type: 'restrict-ips',
  phases: ['on_tcp_connect', 'on_http_request', 'on_http_response'],
  termination: 'conditionally',
  configKeys: ['allow', 'deny', 'ip_policies', 'enforce'],
  compile(config, ctx) {
    const allow = cidrList(config, 'allow');
    const deny = cidrList(config, 'deny');
    const ipPolicies = config.stringList('ip_policies', { min: 0, max: 100 }) ?? [];
    ipPolicies.forEach((id, i) => {
      if (!isId(id, ID_PREFIX.ipPolicy)) {
        config.fail(
          `ip_policies[${i}]`,
          `must be an IP policy id like ipp_2bhsNc9X6FO3i2wzTOgIH8jAe52, not ${quote(String(id), '"')}`,
        );
      }
    });
    if (allow.length + deny.length + ipPolicies.length === 0) {
      config.fail(
        'allow',
        'or deny or ip_policies must list at least one entry; an empty restriction would let everyone through',
      );
    }
    const enforce = config.boolean('enforce') ?? true;
    const refusal: Terminal =
      ctx.phase === 'on_tcp_connect'
        ? CLOSE
        : Object.freeze({
            kind: 'respond',
            status: 403,
            headers: Object.freeze({}),
            body: '',
            refusal: IP_REFUSAL,
          });

    const verdict = (c: PhaseContext, result: IpVerdict, ip: string): ActionOutcome => {
      publishResult(c, result);
      if (result.ok) return undefined;
      if (!enforce) {
        c.event('would-restrict', `${ip} is not allowed (enforce is false: let through)`);
        return undefined;
      }
      c.event('restricted', `${ip} is not allowed`);
      return refusal;
    };

    return {
      alwaysTerminates: false,
      ipPolicyIds: ipPolicies,
      run(c) {
        const text = c.activation.conn.client_ip;
        const ip = parseIp(text);
        if (ipPolicies.length === 0) return verdict(c, allowed(ip, allow, deny), text);
        return c.ipPolicyRules(ipPolicies).then(
          (rules: readonly IpPolicyRule[]) => {
            const allowAll = [...allow];
            const denyAll = [...deny];
            for (const rule of rules) {
              const block = ruleCidr(rule.cidr);
              if (block) (rule.action === 'deny' ? denyAll : allowAll).push(block);
            }
            return verdict(c, allowed(ip, allowAll, denyAll), text);
          },
          (err: unknown) => {
            const then = enforce
              ? `refusing ${text}`
              : `letting ${text} through (enforce is false)`;
            const message = `cannot read IP policies ${ipPolicies.join(', ')}: ${(err as Error).message}`;
            c.event('error', `${message}; ${then}`);
            publishResult(c, undefined, { code: CODES.ipRestricted, message });
            return enforce ? refusal : undefined;
          },
        );
      },
    };
  },
};
