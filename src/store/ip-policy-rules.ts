import { enclosingCidr, formatCidr, parseCidr } from '../core/cidr.js';
import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { quote } from '../core/quote.js';
import { isForeignKeyViolation, isUniqueViolation } from './database.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns } from './described.js';
import { ResourceRepository } from './resource-repository.js';
import type { IpPolicyRulesTable } from './schema.js';

export type IpAction = 'allow' | 'deny';

/** One CIDR block of an IP policy with what to do with addresses in it. */
export interface IpPolicyRule {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  /** Canonical text: the network address in shortest form, then the prefix. */
  cidr: string;
  ip_policy_id: string;
  action: IpAction;
}

export interface IpPolicyRuleCreate {
  cidr: string;
  ip_policy_id: string;
  action: string;
  description?: string | undefined;
  metadata?: string | undefined;
}

/**
 * What PATCH may send. `action` and `ip_policy_id` are accepted only so that sending them gets a
 * message that says how to change them (delete and recreate) rather than "unknown field".
 */
export interface IpPolicyRuleUpdate {
  cidr?: string | undefined;
  description?: string | undefined;
  metadata?: string | undefined;
  action?: unknown;
  ip_policy_id?: unknown;
}

function toRule(row: IpPolicyRulesTable): IpPolicyRule {
  return { ...row, action: row.action === 'allow' ? 'allow' : 'deny' };
}

/**
 * Check a CIDR and return its canonical text, or throw the error that says how to fix it.
 * @example canonicalCidr(' 2001:DB8::/32') // '2001:db8::/32'
 */
export function canonicalCidr(input: string): string {
  const text = input.trim();
  const parsed = parseCidr(text);
  if (!('problem' in parsed)) {
    // Clients are matched as IPv4 when they connect over IPv4-mapped IPv6 (see parseIp), so a
    // block inside ::ffff:0:0/96 is stored as the IPv4 block it stands for, or it would never match.
    const mapped = parsed.family === 6 && parsed.prefix >= 96 && parsed.network >> 32n === 0xffffn;
    return formatCidr(
      mapped
        ? { family: 4, network: parsed.network & 0xffffffffn, prefix: parsed.prefix - 96 }
        : parsed,
    );
  }
  switch (parsed.problem) {
    case 'missing-mask':
      throw new ValidationError(
        CODES.cidrMissingMask,
        'cidr',
        `${quote(text)} has no mask: write the block with its prefix length, e.g. '${text}/${text.includes(':') ? 128 : 32}' for this one address`,
      );
    case 'not-network-address':
      throw new ValidationError(
        CODES.cidrNotNetworkAddress,
        'cidr',
        `${quote(text)} does not start at the lowest address of its range; did you mean '${enclosingCidr(text)}'?`,
      );
    default:
      throw new ValidationError(
        CODES.invalidCidr,
        'cidr',
        `${quote(text)} is not a valid CIDR block: write an IPv4 or IPv6 network address, '/', and a prefix length (e.g. '192.0.2.0/24' or '2001:db8::/32')`,
      );
  }
}

function checkAction(action: string): IpAction {
  if (action === 'allow' || action === 'deny') return action;
  throw new ValidationError(
    CODES.invalidIpAction,
    'action',
    `must be 'allow' or 'deny', got ${quote(action, '"')}`,
  );
}

function refuseImmutable(patch: IpPolicyRuleUpdate): void {
  for (const field of ['action', 'ip_policy_id'] as const) {
    if (patch[field] === undefined) continue;
    throw new ValidationError(
      CODES.invalidValue,
      field,
      `${field} cannot be changed on an existing rule. Delete the rule and create a new one with the ${field} you want.`,
    );
  }
}

/**
 * IP policy rules. CIDRs are stored in canonical text, so one block appears once per policy.
 * @example await rules.create({ ip_policy_id: 'ipp_...', cidr: '212.3.14.0/24', action: 'allow' })
 */
export class IpPolicyRuleRepository extends ResourceRepository<'ip_policy_rules', IpPolicyRule> {
  constructor(deps: RepoDeps) {
    super(deps.db, 'ip_policy_rules', toRule);
  }

  async create(input: IpPolicyRuleCreate): Promise<IpPolicyRule> {
    const cidr = canonicalCidr(input.cidr);
    const action = checkAction(input.action);
    const row: IpPolicyRulesTable = {
      id: newId(ID_PREFIX.ipPolicyRule),
      ...describedColumns(input),
      cidr,
      ip_policy_id: input.ip_policy_id,
      action,
    };
    const policy = await this.db
      .selectFrom('ip_policies')
      .select('id')
      .where('id', '=', input.ip_policy_id)
      .executeTakeFirst();
    if (!policy) throw this.unknownPolicy(input.ip_policy_id);
    try {
      await this.db.insertInto('ip_policy_rules').values(row).execute();
    } catch (err) {
      if (isForeignKeyViolation(err)) throw this.unknownPolicy(input.ip_policy_id);
      throw await this.duplicate(err, row.ip_policy_id, cidr);
    }
    return toRule(row);
  }

  async update(id: string, patch: IpPolicyRuleUpdate): Promise<IpPolicyRule | undefined> {
    refuseImmutable(patch);
    const set: Partial<IpPolicyRulesTable> = describedChanges(patch);
    if (patch.cidr !== undefined) set.cidr = canonicalCidr(patch.cidr);
    await this.writeColumns(id, set, async (err) => {
      const current = await this.get(id);
      return this.duplicate(err, current?.ip_policy_id ?? '', set.cidr ?? '');
    });
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteRow(id);
  }

  private unknownPolicy(id: string): ValidationError {
    return new ValidationError(
      CODES.invalidReference,
      'ip_policy_id',
      `no IP policy has the id ${quote(id)}. Create the policy first (POST /ip_policies) or use the id of an existing one.`,
    );
  }

  /** The 409 for a CIDR the policy already has, naming the rule that has it. */
  private async duplicate(err: unknown, policyId: string, cidr: string): Promise<unknown> {
    if (!isUniqueViolation(err)) return err;
    const existing = await this.db
      .selectFrom('ip_policy_rules')
      .select('id')
      .where('ip_policy_id', '=', policyId)
      .where('cidr', '=', cidr)
      .executeTakeFirst();
    return new ConflictError(
      CODES.duplicateCidr,
      `The IP policy ${policyId} already has a rule for ${cidr}${existing ? ` (${existing.id})` : ''}. Each CIDR may appear once per policy; change that rule instead.`,
    );
  }
}
