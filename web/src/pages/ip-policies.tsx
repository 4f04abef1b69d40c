import { useState } from 'react';
import type { Ref } from '../api';
import { DeleteButton, PageHeader } from '../components';
import { CreateForm, SelectField, TextField } from '../fields';
import { useAction, useResource } from '../hooks';
import { ResourceCard, ResourceList } from '../resource';

export interface IpPolicy {
  id: string;
  description: string;
}

interface IpPolicyRule {
  id: string;
  cidr: string;
  action: string;
  description: string;
  ip_policy: Ref;
}

function RuleForm({ policy, onAdded }: { policy: IpPolicy; onAdded: () => Promise<void> }) {
  const [cidr, setCidr] = useState('');
  const [ruleAction, setRuleAction] = useState('allow');
  const action = useAction();
  const add = async () => {
    const body = { ip_policy_id: policy.id, cidr: cidr.trim(), action: ruleAction };
    if (await action.send('POST', '/ip_policy_rules', body, onAdded)) setCidr('');
  };
  return (
    <CreateForm
      className="inline-form"
      label={`Add a rule to ${policy.description || policy.id}`}
      submit="Add rule"
      action={action}
      onSubmit={add}
    >
      <TextField
        label="CIDR"
        hint="e.g. 203.0.113.0/24 or 2001:db8::/32"
        value={cidr}
        onChange={setCidr}
        required
      />
      <SelectField label="Action" value={ruleAction} onChange={setRuleAction}>
        <option value="allow">allow</option>
        <option value="deny">deny</option>
      </SelectField>
    </CreateForm>
  );
}

/** IP policies and their allow/deny rules, for edges' IP restriction modules. */
export function IpPoliciesPage() {
  const policies = useResource<IpPolicy>('/ip_policies', 'ip_policies');
  // One action for the page: a rule's delete error shows by the policy form, as a policy's does.
  const rules = useResource<IpPolicyRule>('/ip_policy_rules', 'ip_policy_rules', {
    action: policies.action,
  });
  const [description, setDescription] = useState('');
  const create = async () => {
    if (await policies.create({ description })) setDescription('');
  };
  return (
    <>
      <PageHeader title="IP policies">
        An IP policy is a list of CIDR rules. Attach it to an edge (IP restriction) and only clients
        its allow rules match, and no deny rule matches, get through.
      </PageHeader>
      <CreateForm
        label="Create an IP policy"
        submit="Create IP policy"
        action={policies.action}
        onSubmit={create}
      >
        <TextField
          label="Description"
          hint="e.g. “office”"
          value={description}
          onChange={setDescription}
          maxLength={255}
        />
      </CreateForm>
      <ResourceList
        items={policies.items}
        error={policies.error ?? rules.error}
        empty="No IP policies yet. Create one, add allow rules for your networks, then use it on an edge."
      >
        {(items) =>
          items.map((pol) => {
            const name = pol.description || pol.id;
            const mine = rules.items?.filter((r) => r.ip_policy.id === pol.id) ?? [];
            return (
              <ResourceCard
                key={pol.id}
                label={`IP policy ${name}`}
                title={name}
                actions={
                  <DeleteButton name={`IP policy ${name}`} onDelete={() => policies.remove(pol)} />
                }
              >
                <p className="muted">
                  <code>{pol.id}</code>
                </p>
                {mine.length === 0 ? (
                  <p className="empty-inline">
                    No rules: this policy lets nobody through. Add an allow rule.
                  </p>
                ) : (
                  <ul className="rules">
                    {mine.map((r) => (
                      <li key={r.id}>
                        <span className={`badge ${r.action}`}>{r.action}</span>{' '}
                        <code>{r.cidr}</code>
                        <DeleteButton name={`rule ${r.cidr}`} onDelete={() => rules.remove(r)} />
                      </li>
                    ))}
                  </ul>
                )}
                <RuleForm policy={pol} onAdded={rules.reload} />
              </ResourceCard>
            );
          })
        }
      </ResourceList>
    </>
  );
}
