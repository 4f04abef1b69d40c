import { useState, type FormEvent } from 'react';
import { api, type Ref } from '../api';
import {
  DeleteButton,
  EmptyState,
  ErrorMessage,
  Field,
  PageHeader,
  useAction,
  useList,
} from '../components';

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
  const add = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(async () => {
      await api('POST', '/ip_policy_rules', {
        ip_policy_id: policy.id,
        cidr: cidr.trim(),
        action: ruleAction,
      });
      await onAdded();
    });
    if (ok) setCidr('');
  };
  return (
    <form
      className="inline-form"
      onSubmit={(e) => void add(e)}
      aria-label={`Add a rule to ${policy.description || policy.id}`}
    >
      <Field label="CIDR" hint="e.g. 203.0.113.0/24 or 2001:db8::/32">
        {(p) => <input {...p} value={cidr} onChange={(e) => setCidr(e.target.value)} required />}
      </Field>
      <Field label="Action">
        {(p) => (
          <select {...p} value={ruleAction} onChange={(e) => setRuleAction(e.target.value)}>
            <option value="allow">allow</option>
            <option value="deny">deny</option>
          </select>
        )}
      </Field>
      <button type="submit" disabled={action.busy}>
        Add rule
      </button>
      <ErrorMessage error={action.error} />
    </form>
  );
}

/** IP policies and their allow/deny rules, for edges' IP restriction modules. */
export function IpPoliciesPage() {
  const policies = useList<IpPolicy>('/ip_policies', 'ip_policies');
  const rules = useList<IpPolicyRule>('/ip_policy_rules', 'ip_policy_rules');
  const [description, setDescription] = useState('');
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    if (
      await action.run(async () => {
        await api('POST', '/ip_policies', { description });
        await policies.reload();
      })
    )
      setDescription('');
  };
  return (
    <>
      <PageHeader title="IP policies">
        An IP policy is a list of CIDR rules. Attach it to an edge (IP restriction) and only clients
        its allow rules match, and no deny rule matches, get through.
      </PageHeader>
      <form
        className="card inline-form"
        onSubmit={(e) => void create(e)}
        aria-label="Create an IP policy"
      >
        <Field label="Description" hint="e.g. “office”">
          {(p) => (
            <input
              {...p}
              value={description}
              onChange={(e) => setDescription(e.target.value)}
              maxLength={255}
            />
          )}
        </Field>
        <button type="submit" disabled={action.busy}>
          Create IP policy
        </button>
        <ErrorMessage error={action.error} />
      </form>
      <ErrorMessage error={policies.error ?? rules.error} />
      {policies.items?.length === 0 ? (
        <EmptyState>
          No IP policies yet. Create one, add allow rules for your networks, then use it on an edge.
        </EmptyState>
      ) : (
        policies.items?.map((pol) => {
          const mine = rules.items?.filter((r) => r.ip_policy.id === pol.id) ?? [];
          return (
            <section
              key={pol.id}
              className="card"
              aria-label={`IP policy ${pol.description || pol.id}`}
            >
              <div className="card-head">
                <h2>{pol.description || pol.id}</h2>
                <DeleteButton
                  name={`IP policy ${pol.description || pol.id}`}
                  onDelete={() =>
                    action
                      .run(async () => {
                        await api('DELETE', `/ip_policies/${pol.id}`);
                        await policies.reload();
                      })
                      .then(() => undefined)
                  }
                />
              </div>
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
                      <span className={`badge ${r.action}`}>{r.action}</span> <code>{r.cidr}</code>
                      <DeleteButton
                        name={`rule ${r.cidr}`}
                        onDelete={() =>
                          action
                            .run(async () => {
                              await api('DELETE', `/ip_policy_rules/${r.id}`);
                              await rules.reload();
                            })
                            .then(() => undefined)
                        }
                      />
                    </li>
                  ))}
                </ul>
              )}
              <RuleForm policy={pol} onAdded={rules.reload} />
            </section>
          );
        })
      )}
    </>
  );
}
