import type { IpRule } from '../core/cidr.js';
import { CODES } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, type DescribedInput } from './described.js';
import { ResourceRepository } from './resource-repository.js';
import { missingIds, refuseWhileReferenced } from './refs.js';
import type { IpPoliciesTable } from './schema.js';

/** An IP policy: a named group of allow and deny rules that edges use to restrict source IPs. */
export interface IpPolicy {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
}

export type IpPolicyCreate = DescribedInput;

export type IpPolicyUpdate = IpPolicyCreate;

/**
 * IP policies. Their rules live in IpPolicyRuleRepository and go with the policy when it is
 * deleted; a policy that an edge's ip_restriction uses cannot be deleted.
 * @example const policy = await ipPolicies.create({ description: 'office' });
 */
export class IpPolicyRepository extends ResourceRepository<'ip_policies', IpPolicy> {
  constructor(deps: RepoDeps) {
    super(deps.db, 'ip_policies', (row) => row);
  }

  async create(input: IpPolicyCreate): Promise<IpPolicy> {
    const row: IpPoliciesTable = { id: newId(ID_PREFIX.ipPolicy), ...describedColumns(input) };
    await this.db.insertInto('ip_policies').values(row).execute();
    return row;
  }

  async update(id: string, patch: IpPolicyUpdate): Promise<IpPolicy | undefined> {
    await this.writeColumns(id, describedChanges(patch));
    return this.get(id);
  }

  /** Delete the policy and its rules; false when absent. Refused while an edge uses it. */
  async delete(id: string): Promise<boolean> {
    return this.deleteChecked(id, async (trx) => {
      await refuseWhileReferenced(
        trx,
        id,
        CODES.ipPolicyInUse,
        (by) =>
          `The IP policy ${id} is still used by ${by}. Remove it from that edge's ip_restriction first.`,
      );
      // The foreign key cascades too; deleting the rules here keeps that true even on a SQLite
      // connection opened without foreign_keys = ON.
      await trx.deleteFrom('ip_policy_rules').where('ip_policy_id', '=', id).execute();
    });
  }

  /** Ids among `ids` that name no IP policy, in the order given (for reference checks). */
  async missing(ids: readonly string[]): Promise<string[]> {
    return missingIds(this.db, 'ip_policies', ids);
  }

  /**
   * The rules of all of `policyIds`, combined, for the edge to evaluate with `ipAllowed` at
   * connect time. Unknown ids contribute no rules (a deleted policy restricts like an empty one).
   * @example ipAllowed(await ipPolicies.rulesFor(['ipp_...']), socket.remoteAddress)
   */
  async rulesFor(policyIds: readonly string[]): Promise<IpRule[]> {
    if (policyIds.length === 0) return [];
    const rows = await this.db
      .selectFrom('ip_policy_rules')
      .select(['cidr', 'action'])
      .where('ip_policy_id', 'in', [...new Set(policyIds)])
      .orderBy('id')
      .execute();
    return rows.map((r) => ({ cidr: r.cidr, action: r.action === 'allow' ? 'allow' : 'deny' }));
  }
}
