import { EventEmitter } from 'node:events';
import pg from 'pg';

/** One message between the nodes of a cluster: who sent it, about what, and a small payload. */
export interface StoreNotice {
  /** The sending node's id; a node receives its own notices too and filters by this. */
  from: string;
  topic: string;
  data?: unknown;
}

export interface StoreNotificationsOptions {
  /** The PostgreSQL URL (the store's). */
  url: string;
  /** This node's id: the `from` of its notices. */
  from: string;
  /** Default 'burrow'. */
  channel?: string | undefined;
  /** Told about connection losses, failed reconnects and ignored payloads; default: stderr. */
  onError?: ((err: Error) => void) | undefined;
}

/** PostgreSQL refuses a NOTIFY payload of this many bytes or more (NOTIFY_PAYLOAD_MAX_LENGTH). */
const NOTIFY_PAYLOAD_LIMIT = 8000;

const FIRST_RETRY_MS = 250;
const LAST_RETRY_MS = 5000;
const CONNECT_TIMEOUT_MS = 10_000;

type Events = { notice: [StoreNotice]; resync: [] };

/** The notice in `payload`, or a description of what is wrong with it. */
function parseNotice(payload: string | undefined): StoreNotice | string {
  let value: unknown;
  try {
    value = JSON.parse(payload ?? '');
  } catch {
    return 'not JSON';
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'not an object';
  const { from, topic } = value as Record<string, unknown>;
  if (typeof from !== 'string' || typeof topic !== 'string') return 'from or topic missing';
  const notice: StoreNotice = { from, topic };
  if ('data' in value) notice.data = value.data;
  return notice;
}

/**
 * LISTEN on one channel over a dedicated pg.Client (not the store's pool, whose connections come
 * and go): 'notice' (StoreNotice) for every notice, this process's own included (callers filter
 * by `from`), and 'resync' after a reconnect: notices sent while the connection was down are lost,
 * so callers reload what they follow. A dropped connection is reopened with backoff (250 ms
 * doubling to 5 s); nothing here throws at the process, and 'error' is never emitted: problems go
 * to `onError`.
 * @example
 * const notices = await StoreNotifications.start({ url, from: nodeId });
 * notices.on('notice', (n) => { if (n.from !== nodeId && n.topic === 'edges') void reloadEdges(); });
 * notices.on('resync', () => void reloadEdges());
 * await notices.notify('edges', { id: 'edghts_…' });
 */
export class StoreNotifications extends EventEmitter<Events> {
  /** The connected, listening client; undefined while reconnecting or after close. */
  private client: pg.Client | undefined;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = FIRST_RETRY_MS;
  private readonly channel: string;
  private readonly report: (err: Error) => void;

  private constructor(private readonly options: StoreNotificationsOptions) {
    super();
    this.channel = options.channel ?? 'burrow';
    this.report =
      options.onError ??
      ((err) => process.stderr.write(`burrow: store notifications: ${err.message}\n`));
  }

  /**
   * Connect and LISTEN; rejects when the first connection fails (a wrong URL should stop the
   * start), later losses are reconnected.
   * @example const notices = await StoreNotifications.start({ url: store.url, from: nodeId });
   */
  static async start(options: StoreNotificationsOptions): Promise<StoreNotifications> {
    const notifications = new StoreNotifications(options);
    await notifications.connect();
    return notifications;
  }

  /**
   * Send a notice to every listener on the channel (this process's included). The payload is
   * JSON `{from, topic, data}` and must stay under PostgreSQL's 8000-byte limit: send ids, and
   * let receivers read the rest from the store.
   * @example await notices.notify('settings', { key: 'edge_region' });
   */
  async notify(topic: string, data?: unknown): Promise<void> {
    if (this.closed) throw new Error('store notifications are closed');
    const payload = JSON.stringify({ from: this.options.from, topic, data });
    const bytes = Buffer.byteLength(payload);
    if (bytes >= NOTIFY_PAYLOAD_LIMIT) {
      throw new Error(
        `notice '${topic}' is ${bytes} bytes; PostgreSQL takes payloads under ${NOTIFY_PAYLOAD_LIMIT} bytes (send ids, not records)`,
      );
    }
    const client = this.client;
    if (client) {
      try {
        await client.query('select pg_notify($1, $2)', [this.channel, payload]);
        return;
      } catch {
        // The listening connection just dropped: send over a connection of our own below, so
        // the notice is not lost only because this process is reconnecting.
      }
    }
    const once = new pg.Client({
      connectionString: this.options.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    });
    // Failures reach the awaited calls below; without a listener a late 'error' would crash.
    once.on('error', () => undefined);
    try {
      await once.connect();
      await once.query('select pg_notify($1, $2)', [this.channel, payload]);
    } finally {
      await once.end().catch(() => undefined);
    }
  }

  /**
   * Stop listening and reconnecting.
   * @example await notices.close();
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  /** Open a client and LISTEN; on success it becomes `this.client`. */
  private async connect(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.options.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // A silently vanished peer (network partition) would otherwise leave us deaf indefinitely.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      application_name: 'burrow notifications',
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    client.on('notification', (msg) => {
      if (msg.channel === this.channel) this.receive(msg.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`);
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
  }

  private receive(payload: string | undefined): void {
    const notice = parseNotice(payload);
    if (typeof notice === 'string') {
      this.report(new Error(`ignored a malformed notice on '${this.channel}' (${notice})`));
      return;
    }
    this.emitSafely('notice', () => this.emit('notice', notice));
  }

  /** The current client failed or ended: reconnect. Events of clients already given up are old news. */
  private lost(client: pg.Client, err: Error): void {
    if (client !== this.client) return;
    this.client = undefined;
    this.report(new Error(`connection lost (${err.message}); reconnecting`));
    // Ending a broken client releases its socket; it is ours no more either way.
    client.end().catch(() => undefined);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retryTimer) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, LAST_RETRY_MS);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.reconnect();
    }, delay);
  }

  private async reconnect(): Promise<void> {
    try {
      await this.connect();
    } catch (err) {
      this.report(new Error(`reconnect failed (${(err as Error).message})`));
      this.scheduleReconnect();
      return;
    }
    if (this.closed) return;
    this.retryMs = FIRST_RETRY_MS;
    this.emitSafely('resync', () => this.emit('resync'));
  }

  /** Emit without letting a listener's exception escape into pg's socket handler or our timers. */
  private emitSafely(event: keyof Events, emit: () => void): void {
    try {
      emit();
    } catch (err) {
      this.report(new Error(`a '${event}' listener threw: ${(err as Error).message}`));
    }
  }
}
