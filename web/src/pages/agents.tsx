import type { Ref } from '../api';
import { Chips, ConfirmButton, labelPairs, PageHeader, When } from '../components';
import { useAction, useList } from '../hooks';
import { ResourceCard, ResourceList } from '../resource';

export interface TunnelSession {
  id: string;
  agent_version: string;
  credential: Ref;
  ip: string;
  os: string;
  started_at: string;
  transport: string;
  /** The cluster node holding the session; '' on a single node. */
  node_id?: string;
}

export interface Tunnel {
  id: string;
  public_url?: string;
  proto?: string;
  labels?: Record<string, string>;
  forwards_to: string;
  tunnel_session: Ref;
}

/** Agents: online tunnel sessions with their tunnels; stop or restart one. */
export function AgentsPage() {
  const sessions = useList<TunnelSession>('/tunnel_sessions', 'tunnel_sessions', 3000);
  const tunnels = useList<Tunnel>('/tunnels', 'tunnels', 3000);
  const action = useAction();
  return (
    <>
      <PageHeader title="Agents">
        Agents connected now, with the tunnels each one serves. Stop tells an agent to exit; restart
        tells it to reconnect.
      </PageHeader>
      <ResourceList
        items={sessions.items}
        error={sessions.error ?? tunnels.error ?? action.error}
        empty={
          <>
            No agent is connected. Create an authtoken (Authtokens page), then run{' '}
            <code>burrow agent --authtoken &lt;token&gt;</code> or any ngrok-compatible agent.
          </>
        }
      >
        {(items) =>
          items.map((s) => {
            const mine = tunnels.items?.filter((t) => t.tunnel_session.id === s.id) ?? [];
            return (
              <ResourceCard
                key={s.id}
                label={`Agent ${s.id}`}
                title={<code>{s.id}</code>}
                actions={
                  <span className="actions">
                    {/* Both cut the agent's tunnels off; stop also ends the agent, so both ask first. */}
                    <ConfirmButton
                      verb="Restart"
                      name={`agent ${s.id}`}
                      className="secondary"
                      onConfirm={() =>
                        action.send('POST', `/tunnel_sessions/${s.id}/restart`, {}, sessions.reload)
                      }
                    />
                    <ConfirmButton
                      verb="Stop"
                      name={`agent ${s.id}`}
                      onConfirm={() =>
                        action.send('POST', `/tunnel_sessions/${s.id}/stop`, {}, sessions.reload)
                      }
                    />
                  </span>
                }
              >
                <dl className="facts">
                  <div>
                    <dt>Address</dt>
                    <dd>{s.ip}</dd>
                  </div>
                  <div>
                    <dt>Agent</dt>
                    <dd>
                      {s.agent_version || '?'} on {s.os || '?'} ({s.transport})
                    </dd>
                  </div>
                  <div>
                    <dt>Authtoken</dt>
                    <dd>
                      <code>{s.credential.id}</code>
                    </dd>
                  </div>
                  <div>
                    <dt>Connected</dt>
                    <dd>
                      <When iso={s.started_at} />
                    </dd>
                  </div>
                  {s.node_id ? (
                    <div>
                      <dt>Node</dt>
                      <dd>
                        <code>{s.node_id}</code>
                      </dd>
                    </div>
                  ) : null}
                </dl>
                {mine.length === 0 ? (
                  <p className="muted">No tunnels.</p>
                ) : (
                  <ul className="rows">
                    {mine.map((t) => (
                      <li key={t.id}>
                        <span>
                          {t.public_url ? (
                            <code>{t.public_url}</code>
                          ) : (
                            <Chips values={labelPairs(t.labels ?? {})} />
                          )}
                          {' → '}
                          <code>{t.forwards_to || '?'}</code>
                        </span>
                      </li>
                    ))}
                  </ul>
                )}
              </ResourceCard>
            );
          })
        }
      </ResourceList>
    </>
  );
}
