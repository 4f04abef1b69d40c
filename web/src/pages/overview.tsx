import { api } from '../api';
import { TrafficCharts } from '../charts';
import { ErrorMessage, PageHeader } from '../components';
import { useLoad } from '../hooks';

interface Counts {
  sessions: number;
  tunnels: number;
  endpoints: number;
  lastHour: number;
}

/** How much is online now, and how many requests came in the last hour (counted up to 100). */
async function loadCounts(): Promise<Counts> {
  const [s, t, e, traffic] = await Promise.all([
    api<{ tunnel_sessions: unknown[] }>('GET', '/tunnel_sessions?limit=100'),
    api<{ tunnels: unknown[] }>('GET', '/tunnels?limit=100'),
    api<{ endpoints: unknown[] }>('GET', '/endpoints?limit=100'),
    api<{ requests: Array<{ started_at: string }> }>('GET', '/traffic?limit=100'),
  ]);
  const hourAgo = Date.now() - 3600_000;
  return {
    sessions: s.tunnel_sessions.length,
    tunnels: t.tunnels.length,
    endpoints: e.endpoints.length,
    lastHour: traffic.requests.filter((r) => Date.parse(r.started_at) > hourAgo).length,
  };
}

/**
 * Overview: what is online now, charts of this node's traffic and agents over the last hour or day,
 * and first steps.
 */
export function OverviewPage() {
  const { data: counts, error } = useLoad(loadCounts, 5000);
  const stat = (label: string, value: number | undefined, href: string, more = false) => (
    <a className="stat card" href={href}>
      <span className="value">
        {value === undefined ? '…' : `${value}${more && value >= 100 ? '+' : ''}`}
      </span>
      <span className="label">{label}</span>
    </a>
  );
  return (
    <>
      <PageHeader title="Overview">
        What is online now, and the traffic of the last hour.
      </PageHeader>
      <ErrorMessage error={error} />
      <div className="stats">
        {stat('Agents online', counts?.sessions, '#/agents', true)}
        {stat('Tunnels', counts?.tunnels, '#/agents', true)}
        {stat('Endpoints', counts?.endpoints, '#/agents', true)}
        {stat('Requests in the last hour', counts?.lastHour, '#/traffic', true)}
      </div>
      <TrafficCharts agents />
      <section className="card">
        <h2>Getting started</h2>
        <ol>
          <li>
            Reserve a domain (<a href="#/domains">Reserved domains</a>) and add the DNS records it
            shows.
          </li>
          <li>
            Create a bot user and an authtoken for your agents (<a href="#/bot-users">Bot users</a>,{' '}
            <a href="#/authtokens">Authtokens</a>).
          </li>
          <li>
            Start an agent with that authtoken; it shows under <a href="#/agents">Agents</a>, its
            requests under <a href="#/traffic">Traffic</a>.
          </li>
          <li>
            For the API and CLI, create an <a href="#/api-keys">API key</a>.
          </li>
        </ol>
      </section>
    </>
  );
}
