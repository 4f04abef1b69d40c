import { Fragment, useCallback, useEffect, useRef, useState } from 'react';
import { api } from '../api';
import { EmptyState, ErrorMessage, PageHeader } from '../components';
import { Checkbox, SelectField, TextField } from '../fields';
import { useAction, useLoad } from '../hooks';

interface RequestSummary {
  id: string;
  /** The node that served it, in a cluster (null on a single server). */
  node_id: string | null;
  host: string;
  scheme: string;
  started_at: string;
  method: string;
  path: string;
  status: number | null;
  duration_ms: number | null;
  client_ip: string;
  replay_of: string | null;
  captured: boolean;
  credentials_shown: boolean;
}

interface Body {
  text: string | null;
  base64: string | null;
  size: number;
  truncated: boolean;
}

interface RequestDetail extends RequestSummary {
  request_headers: Array<[string, string]>;
  response_headers: Array<[string, string]>;
  request_body: Body | null;
  response_body: Body | null;
  replay_refusal: string | null;
}

interface TrafficReply {
  available: boolean;
  requests: RequestSummary[];
  hosts: string[];
  captured_hosts: string[];
  credentials_shown_hosts: string[];
  redacted_headers: string[];
  /** In a cluster: nodes that did not answer in time, whose requests are missing. */
  unanswered_nodes: Array<{ node_id: string; error: string }>;
}

function Headers({ title, headers }: { title: string; headers: Array<[string, string]> }) {
  return (
    <div className="table-wrap">
      <table className="headers">
        <caption>{title}</caption>
        <tbody>
          {headers.map(([k, v], i) => (
            <tr key={`${k}-${i}`}>
              <th scope="row">{k}</th>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function BodyView({ title, body }: { title: string; body: Body | null }) {
  if (!body)
    return <p className="muted">{title}: not captured (switch capture on for this endpoint).</p>;
  return (
    <div>
      <h4>
        {title}{' '}
        <span className="muted">
          ({body.size} bytes{body.truncated ? ', cut at the capture limit' : ''})
        </span>
      </h4>
      <pre className="body">{body.text ?? `base64: ${body.base64 ?? ''}`}</pre>
    </div>
  );
}

/** The status filter's choices: a class of status codes, or requests still waiting. */
const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx', 'waiting'] as const;

/** What the list shows: every filter given must match (status class, method, path substring). */
interface Filters {
  status: string;
  method: string;
  path: string;
}

function matches(r: RequestSummary, f: Filters): boolean {
  if (f.method && r.method !== f.method) return false;
  if (f.path && !r.path.toLowerCase().includes(f.path.toLowerCase())) return false;
  if (!f.status) return true;
  if (f.status === 'waiting') return r.status === null;
  return r.status !== null && String(r.status)[0] === f.status[0];
}

function FilterBar({
  filters,
  methods,
  onChange,
}: {
  filters: Filters;
  methods: string[];
  onChange: (f: Filters) => void;
}) {
  return (
    <div className="card inline-form filters" role="search" aria-label="Filter requests">
      <SelectField
        label="Status"
        value={filters.status}
        onChange={(status) => onChange({ ...filters, status })}
      >
        <option value="">Any</option>
        {STATUS_CLASSES.map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
      </SelectField>
      <SelectField
        label="Method"
        value={filters.method}
        onChange={(method) => onChange({ ...filters, method })}
      >
        <option value="">Any</option>
        {methods.map((m) => (
          <option key={m} value={m}>
            {m}
          </option>
        ))}
      </SelectField>
      <TextField
        label="Path contains"
        value={filters.path}
        onChange={(path) => onChange({ ...filters, path })}
      />
    </div>
  );
}

function Detail({ id, onReplayed }: { id: string; onReplayed: () => void }) {
  const { data: detail, error } = useLoad(
    useCallback(() => api<RequestDetail>('GET', `/traffic/${id}`), [id]),
  );
  // Beside the list on a wide screen (sticky), below it on a phone: either way bring it into
  // view, so a request picked far down a long list does not open out of sight.
  const region = useRef<HTMLElement>(null);
  const loaded = detail !== undefined;
  useEffect(() => {
    if (loaded) region.current?.scrollIntoView({ block: 'nearest' });
  }, [id, loaded]);
  const [replayed, setReplayed] = useState<string | undefined>(undefined);
  const action = useAction();
  // What a replay said belongs to the request it replayed.
  useEffect(() => setReplayed(undefined), [id]);
  const replay = () =>
    action.run(async () => {
      const r = await api<{ status: number; omitted_headers: string[] }>(
        'POST',
        `/traffic/${id}/replay`,
        {},
      );
      // Redacted credentials were never kept, so the replay went without them.
      const omitted = r.omitted_headers.length
        ? ` Sent without ${r.omitted_headers.join(', ')} (redacted).`
        : '';
      setReplayed(`Replayed: the service answered ${r.status}.${omitted}`);
      onReplayed();
    });
  if (error) return <ErrorMessage error={error} />;
  if (!detail) return <p className="loading">Loading…</p>;
  return (
    <section
      ref={region}
      className="card detail"
      aria-label={`Request ${detail.method} ${detail.path}`}
    >
      <div className="card-head">
        <h2>
          <code>
            {detail.method} {detail.path}
          </code>
        </h2>
        <button
          type="button"
          onClick={() => void replay()}
          disabled={action.busy || detail.replay_refusal !== null}
        >
          Replay
        </button>
      </div>
      {detail.replay_refusal ? <p className="hint">{detail.replay_refusal}</p> : null}
      {replayed ? (
        <p className="ok" role="status">
          {replayed}
        </p>
      ) : null}
      <ErrorMessage error={action.error} />
      <p>
        {detail.scheme}://{detail.host} from {detail.client_ip}: {detail.status ?? '…'} in{' '}
        {detail.duration_ms ?? '…'} ms
        {detail.node_id ? ` (served by node ${detail.node_id}, which replays it)` : ''}
      </p>
      <p className="hint">
        {detail.credentials_shown
          ? 'Credentials shown: this endpoint was set to show them when the request came.'
          : 'Credentials redacted: only their scheme, cookie names and length are kept.'}
      </p>
      <Headers title="Request headers" headers={detail.request_headers} />
      <BodyView title="Request body" body={detail.request_body} />
      <Headers title="Response headers" headers={detail.response_headers} />
      <BodyView title="Response body" body={detail.response_body} />
    </section>
  );
}

/** Traffic: the last requests of each HTTP endpoint, live, with headers, bodies and replay. */
export function TrafficPage() {
  const [host, setHost] = useState('');
  const [selected, setSelected] = useState<string | undefined>(undefined);
  const [filters, setFilters] = useState<Filters>({ status: '', method: '', path: '' });
  const query = host ? `?host=${encodeURIComponent(host)}` : '';
  // Live: new requests show within a second or so.
  const {
    data: reply,
    error,
    reload,
  } = useLoad(
    useCallback(() => api<TrafficReply>('GET', `/traffic${query}`), [query]),
    1000,
  );
  const capture = useAction();
  const setCapture = (h: string, enabled: boolean) =>
    capture.send('PUT', `/traffic/capture/${encodeURIComponent(h)}`, { enabled }, reload);
  const captured = new Set(reply?.captured_hosts ?? []);
  const setShown = (h: string, shown: boolean) =>
    capture.send('PUT', `/traffic/credentials/${encodeURIComponent(h)}`, { shown }, reload);
  const shown = new Set(reply?.credentials_shown_hosts ?? []);
  const requests = reply?.requests ?? [];
  const methods = [...new Set(requests.map((r) => r.method))].sort();
  const visible = requests.filter((r) => matches(r, filters));
  // A cluster: say which node served each request.
  const clustered = requests.some((r) => r.node_id !== null);
  const unanswered = reply?.unanswered_nodes ?? [];
  return (
    <>
      <PageHeader title="Traffic">
        The last requests of each HTTP endpoint, as they arrive. Kept in memory only, by the server
        that served them (the last 100 per endpoint; in a cluster, every node's are shown); bodies
        only for endpoints with capture on. Visitors' credentials (
        {reply?.redacted_headers.join(', ') || 'authorization, cookie, …'}) are redacted unless an
        endpoint shows them.
      </PageHeader>
      <ErrorMessage error={error ?? capture.error} />
      {unanswered.length ? (
        <p className="notice" role="status">
          {unanswered.length === 1 ? 'Node ' : 'Nodes '}
          {unanswered.map((n) => n.node_id).join(', ')} did not answer in time: their requests are
          missing here ({unanswered.map((n) => n.error).join('; ')}).
        </p>
      ) : null}
      {reply && !reply.available ? (
        <EmptyState>
          This server runs no edge (--role api) and no edge node is in its cluster, so it sees no
          traffic.
        </EmptyState>
      ) : null}
      {reply?.hosts.length ? (
        <div className="card inline-form">
          <label>
            Endpoint{' '}
            <select value={host} onChange={(e) => setHost(e.target.value)}>
              <option value="">All</option>
              {reply.hosts.map((h) => (
                <option key={h} value={h}>
                  {h}
                </option>
              ))}
            </select>
          </label>
          {reply.hosts
            .filter((h) => !host || h === host)
            .map((h) => (
              <Fragment key={h}>
                <Checkbox
                  className="switch"
                  checked={captured.has(h)}
                  onChange={(on) => void setCapture(h, on)}
                >
                  {' '}
                  Capture bodies for {h}
                </Checkbox>
                <Checkbox
                  className="switch"
                  checked={shown.has(h)}
                  onChange={(on) => void setShown(h, on)}
                >
                  {' '}
                  Show credentials for {h}
                </Checkbox>
              </Fragment>
            ))}
        </div>
      ) : null}
      {reply?.available && reply.requests.length === 0 ? (
        <EmptyState>
          No requests yet. Start an agent with an HTTP endpoint and send it a request; it shows here
          at once.
        </EmptyState>
      ) : null}
      {requests.length ? (
        <FilterBar filters={filters} methods={methods} onChange={setFilters} />
      ) : null}
      <div className={selected ? 'inspector with-detail' : 'inspector'}>
        {requests.length && visible.length === 0 ? (
          <EmptyState>No request matches the filters.</EmptyState>
        ) : null}
        {visible.length ? (
          <div className="table-wrap">
            <table className="traffic" aria-live="polite">
              <caption className="visually-hidden">Recent requests</caption>
              <thead>
                <tr>
                  <th scope="col">Time</th>
                  <th scope="col">Method</th>
                  <th scope="col">Path</th>
                  <th scope="col">Status</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Client</th>
                  <th scope="col">Host</th>
                  {clustered ? <th scope="col">Node</th> : null}
                </tr>
              </thead>
              <tbody>
                {visible.map((r) => (
                  <tr key={r.id} className={r.id === selected ? 'selected' : undefined}>
                    <td>{new Date(r.started_at).toLocaleTimeString()}</td>
                    <td>{r.method}</td>
                    <td>
                      <button
                        type="button"
                        className="link"
                        onClick={() => setSelected(r.id)}
                        aria-label={`Inspect ${r.method} ${r.path}`}
                      >
                        {r.path}
                      </button>
                      {r.replay_of ? <span className="badge">replay</span> : null}
                    </td>
                    <td className={r.status && r.status >= 400 ? 'bad' : undefined}>
                      {r.status ?? '…'}
                    </td>
                    <td>{r.duration_ms === null ? '…' : `${r.duration_ms} ms`}</td>
                    <td>{r.client_ip}</td>
                    <td>{r.host}</td>
                    {clustered ? <td>{r.node_id}</td> : null}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
        {selected ? <Detail id={selected} onReplayed={() => void reload()} /> : null}
      </div>
    </>
  );
}
