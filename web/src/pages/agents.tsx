import { api, type Ref } from '../api';
import { EmptyState, ErrorMessage, PageHeader, useAction, useList, When } from '../components';

export interface TunnelSession {
  id: string;
  agent_version: string;
  credential: Ref;
  ip: string;
  os: string;
  started_at: string;
  transport: string;
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
  const command = (s: TunnelSession, what: 'stop' | 'restart') =>
    action.run(async () => {
      await api('POST', `/tunnel_sessions/${s.id}/${what}`, {});
      await sessions.reload();
    });
  return (
    <>
      <PageHeader title="Agents">
        Agents connected now, with the tunnels each one serves. Stop tells an agent to exit; restart
        tells it to reconnect.
      </PageHeader>
      <ErrorMessage error={sessions.error ?? tunnels.error ?? action.error} />
      {sessions.items?.length === 0 ? (
        <EmptyState>
          No agent is connected. Create an authtoken (Authtokens page), then run{' '}
          <code>burrow agent --authtoken &lt;token&gt;</code> or any ngrok-compatible agent.
        </EmptyState>
      ) : null}
      {sessions.items?.map((s) => {
        const mine = tunnels.items?.filter((t) => t.tunnel_session.id === s.id) ?? [];
        return (
          <section key={s.id} className="card" aria-label={`Agent ${s.id}`}>
            <div className="card-head">
              <h2>
                <code>{s.id}</code>
              </h2>
              <span className="actions">
                <button
                  type="button"
                  className="secondary"
                  onClick={() => void command(s, 'restart')}
                  aria-label={`Restart agent ${s.id}`}
                >
                  Restart
                </button>
                <button
                  type="button"
                  className="danger"
                  onClick={() => void command(s, 'stop')}
                  aria-label={`Stop agent ${s.id}`}
                >
                  Stop
                </button>
              </span>
            </div>
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
                        Object.entries(t.labels ?? {}).map(([k, v]) => (
                          <code key={k} className="chip">
                            {k}={v}
                          </code>
                        ))
                      )}
                      {' → '}
                      <code>{t.forwards_to || '?'}</code>
                    </span>
                  </li>
                ))}
              </ul>
            )}
          </section>
        );
      })}
    </>
  );
}
