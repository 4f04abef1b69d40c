/** Collection path by id prefix, so any id can become an absolute `uri` or a `Ref`. */
const COLLECTIONS: Record<string, string> = {
  ak: 'api_keys',
  bot: 'bot_users',
  cr: 'credentials',
  sshcr: 'ssh_credentials',
  rd: 'reserved_domains',
  ra: 'reserved_addrs',
  ipp: 'ip_policies',
  ipr: 'ip_policy_rules',
  bkdtg: 'backends/tunnel_group',
  bkdfo: 'backends/failover',
  bkdwd: 'backends/weighted',
  bkdsc: 'backends/static',
  edgtcp: 'edges/tcp',
  edgtls: 'edges/tls',
  ca: 'certificate_authorities',
  cert: 'tls_certificates',
  ts: 'tunnel_sessions',
  tn: 'tunnels',
  ep: 'endpoints',
  vault: 'vaults',
  sec: 'secrets',
  ed: 'event_destinations',
  esb: 'event_subscriptions',
};

export interface Ref {
  id: string;
  uri: string;
}

/**
 * Builds the absolute `uri` fields of API replies from `--public-api-url`.
 * @example new Uris('http://127.0.0.1:4000').ref('bot_2f...') // { id, uri: 'http://127.0.0.1:4000/bot_users/bot_2f...' }
 */
export class Uris {
  constructor(readonly base: string) {}

  /** The absolute URL of a collection path such as `edges/tcp`. */
  collection(path: string): string {
    return `${this.base}/${path}`;
  }

  /** The absolute URL of the resource `id`. */
  of(id: string): string {
    const prefix = id.slice(0, id.indexOf('_'));
    const collection = COLLECTIONS[prefix];
    if (!collection) throw new Error(`no collection for id ${id}`);
    return `${this.base}/${collection}/${id}`;
  }

  ref(id: string): Ref {
    return { id, uri: this.of(id) };
  }
}
