/**
 * How the device agent names its tunnels in its API (`url_part`, `DELETE /tunnels/{url_part}`):
 * a tunnel on a URL by the URL's host, a labeled tunnel (which has no URL) by its labels. One
 * name, one tunnel: a second tunnel on the same domain or with the same labels is refused.
 */
import { splitLabel } from '../core/labels.js';
import { AgentApiError } from './errors.js';
import type { StoredTunnel } from './state-file.js';
import type { TunnelRequest } from './tunnel-input.js';

/**
 * Labels as one text, `key=value` pairs sorted by key and joined with commas: the same labels
 * give the same text in any order, and it reads back (no key or value holds '=' or ',').
 * @example labelsKey({ site: 'a', app: 'web' }) // 'app=web,site=a'
 */
export function labelsKey(labels: Readonly<Record<string, string>>): string {
  return Object.keys(labels)
    .sort()
    .map((key) => `${key}=${labels[key]}`)
    .join(',');
}

/**
 * What names `record` in the API: its URL's host (`host:port` for tcp), or its labels.
 * @example tunnelKey({ protocol: 'labeled', labels: { site: 'a', app: 'web' }, … }) // 'app=web,site=a'
 */
export function tunnelKey(record: StoredTunnel): string {
  return record.protocol === 'labeled' ? labelsKey(record.labels) : record.url_part;
}

/**
 * How logs and messages name a tunnel: its URL, or `labels app=web,site=a`.
 * @example tunnelName(record) // 'https://device1.sitea.example.com:8443'
 */
export function tunnelName(record: StoredTunnel): string {
  return record.protocol === 'labeled' ? `labels ${tunnelKey(record)}` : record.url;
}

/**
 * The key, among `records` keyed by {@link tunnelKey}, of the tunnel `part` names: its url_part
 * (any case), its full URL, or its labels in any order (`site=a,app=web`).
 * @example findTunnelKey(records, 'site=a,app=web') // 'app=web,site=a'
 */
export function findTunnelKey(
  records: ReadonlyMap<string, StoredTunnel>,
  part: string,
): string | undefined {
  const text = part.trim();
  for (const key of [text.toLowerCase(), text]) if (records.has(key)) return key;
  const pairs = text.split(',').map(splitLabel);
  if (pairs.every((p) => p !== undefined)) {
    const key = labelsKey(Object.fromEntries(pairs));
    if (records.has(key)) return key;
  }
  for (const [key, record] of records) if (tunnelName(record) === part) return key;
  return undefined;
}

/**
 * The 409 for a create request whose domain or labels a tunnel in `records` has already, or whose
 * domain serves the agent API itself (`exposeDomain`); undefined when it is new.
 * @example const clash = duplicateRefusal(records, request, undefined); if (clash) throw clash;
 */
export function duplicateRefusal(
  records: Iterable<StoredTunnel>,
  request: TunnelRequest,
  exposeDomain: string | undefined,
): AgentApiError | undefined {
  const all = [...records];
  if (request.protocol === 'labeled') {
    const key = labelsKey(request.labels);
    if (!all.some((r) => tunnelKey(r) === key && r.protocol === 'labeled')) return undefined;
    return new AgentApiError(
      409,
      `a tunnel with the labels ${key} exists already; delete it first with DELETE /tunnels/${encodeURIComponent(key)}`,
      { field: 'labels' },
    );
  }
  const { domain } = request;
  if (exposeDomain === domain) {
    return new AgentApiError(
      409,
      `${domain} serves the agent API itself (--expose); pick another domain`,
      { field: 'domain' },
    );
  }
  const clash = all.find((r) => r.protocol !== 'labeled' && r.domain === domain);
  if (!clash) return undefined;
  return new AgentApiError(
    409,
    `a tunnel on ${domain} exists already (${tunnelName(clash)}); delete it first with DELETE /tunnels/${tunnelKey(clash)}`,
    { field: 'domain' },
  );
}

/**
 * The record a create request stores, before the bind gives an endpoint tunnel its URL.
 * @example draftRecord(request) // { url: '', url_part: '', protocol: 'http', … }
 */
export function draftRecord(request: TunnelRequest): StoredTunnel {
  const created_at = new Date().toISOString();
  const { forwards_to } = request;
  if (request.protocol === 'labeled') {
    return { protocol: 'labeled', labels: request.labels, forwards_to, created_at };
  }
  return {
    url: '',
    url_part: '',
    protocol: request.protocol,
    forwards_to,
    domain: request.domain,
    policy: request.policy,
    ...(request.options ? { options: request.options } : {}),
    created_at,
  };
}
