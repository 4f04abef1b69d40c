/**
 * The device agent's tunnels over one SDK session: create, list and delete, each change written
 * to the state file before it is answered, and every stored tunnel bound again at start on its
 * domain. The agent keeps serving its API when the server cannot be reached: it retries the first
 * connection with backoff, the SDK reconnects later losses by itself, and tunnels the server
 * refuses to bind again are retried until it accepts them or they are deleted.
 */
import { EventEmitter } from 'node:events';
import type { RequestListener } from 'node:http';
import type { Logger } from '../core/logger.js';
import { WakeableSleep } from '../core/wakeable-sleep.js';
import { backoffDelay, type Endpoint, type Session } from '../sdk/index.js';
import { ApiExposure } from './api-exposure.js';
import { AgentApiError } from './errors.js';
import type { DefaultPolicy } from './policy.js';
import type { StateFile, StoredTunnel } from './state-file.js';
import {
  bindFailure,
  createdView,
  describeError,
  isRefusal,
  openTunnelEndpoint,
  tunnelView,
  urlPart,
  type CreatedTunnel,
  type TunnelService,
  type TunnelView,
} from './tunnel-endpoints.js';
import { parseForwardsTo, type TunnelRequest } from './tunnel-input.js';
import {
  draftRecord,
  duplicateRefusal,
  findTunnelKey,
  tunnelKey,
  tunnelName,
} from './tunnel-keys.js';

export interface TunnelManagerOptions {
  state: StateFile;
  defaultPolicy: DefaultPolicy | undefined;
  logger: Logger;
  /** The server, for messages. */
  serverAddr: string;
  /** Open a session (the SDK's connect() with the agent's settings). */
  connect: () => Promise<Session>;
  /** Also serve `handler` (the agent API) through an http tunnel at `domain`. */
  expose?: { domain: string; handler: RequestListener };
  /** Backoff of the first connection and of binds the server refused, in ms. */
  retry?: { initialDelay: number; maxDelay: number };
  /** Each endpoint as it is bound (created or restored), for the inspector (agent.ts). */
  onEndpoint?: (record: StoredTunnel, target: string, endpoint: Endpoint) => void;
}

export interface TunnelManagerEvents {
  /** The agent cannot go on: the server refused its authtoken or the expose domain. */
  fatal: [error: Error];
  /** The server asked this agent to stop. */
  stop: [];
  /** Connected, the API exposed (with --expose) and every stored tunnel asked to bind. */
  online: [];
}

interface Entry {
  record: StoredTunnel;
  /** `host:port` connections go to. */
  target: string;
  endpoint: Endpoint | undefined;
  binding: boolean;
  removed: boolean;
  attempt: number;
  retry: NodeJS.Timeout | undefined;
}

function entryOf(record: StoredTunnel, endpoint: Endpoint | undefined): Entry {
  const { target } = parseForwardsTo(record.forwards_to);
  return { record, target, endpoint, binding: false, removed: false, attempt: 0, retry: undefined };
}

/**
 * The tunnels of one agent process.
 * @example
 * const tunnels = new TunnelManager({ state, defaultPolicy, logger, serverAddr, connect: () => connect(opts) });
 * tunnels.start((await state.load()).tunnels);
 * await tunnels.create(parseTunnelRequest(body));
 */
export class TunnelManager extends EventEmitter<TunnelManagerEvents> implements TunnelService {
  private entries = new Map<string, Entry>();
  private session: Session | undefined;
  private readonly exposure: ApiExposure | undefined;
  private lock: Promise<unknown> = Promise.resolve();
  private closed = false;
  private readonly pause = new WakeableSleep();
  private readonly retry: { initialDelay: number; maxDelay: number };

  constructor(private readonly options: TunnelManagerOptions) {
    super();
    this.retry = options.retry ?? { initialDelay: 250, maxDelay: 15_000 };
    if (options.expose) {
      this.exposure = new ApiExposure({
        ...options.expose,
        defaultPolicy: options.defaultPolicy,
        logger: options.logger,
        retryMs: this.retry.maxDelay / 10,
        onFatal: (error) => this.emit('fatal', error),
      });
    }
  }

  /** The session, once the first connection succeeded. */
  get currentSession(): Session | undefined {
    return this.session;
  }

  /** The public URL of the exposed agent API, once bound. */
  get exposedUrl(): string | undefined {
    return this.exposure?.url;
  }

  /** Take the stored tunnels and start connecting (in the background). */
  start(stored: readonly StoredTunnel[]): void {
    for (const record of stored) this.entries.set(tunnelKey(record), entryOf(record, undefined));
    void this.run();
  }

  list(): TunnelView[] {
    return [...this.entries.values()].map(({ record }) =>
      tunnelView(record, this.options.defaultPolicy),
    );
  }

  create(request: TunnelRequest): Promise<CreatedTunnel> {
    return this.exclusive(async () => {
      if (this.closed) throw new AgentApiError(503, 'the agent is shutting down');
      const records = [...this.entries.values()].map((e) => e.record);
      const clash = duplicateRefusal(records, request, this.options.expose?.domain);
      if (clash) throw clash;
      const session = this.session;
      if (!session || !session.connected) {
        throw new AgentApiError(
          503,
          `not connected to the server at ${this.options.serverAddr} (the agent keeps trying); try again in a moment`,
        );
      }
      const draft = draftRecord(request);
      let endpoint: Endpoint;
      try {
        endpoint = await openTunnelEndpoint(
          session,
          draft,
          request.target,
          this.options.defaultPolicy,
        );
      } catch (err) {
        throw bindFailure(err, request, this.options.serverAddr);
      }
      // A labeled tunnel has no URL: its labels name it. Others are named by the URL's host.
      const record: StoredTunnel =
        draft.protocol === 'labeled'
          ? draft
          : { ...draft, url: endpoint.url!, url_part: urlPart(endpoint.url!, draft.protocol) };
      const key = tunnelKey(record);
      const entry = entryOf(record, endpoint);
      this.entries.set(key, entry);
      try {
        await this.persist();
      } catch (err) {
        this.entries.delete(key);
        await endpoint.close().catch(() => undefined);
        throw new AgentApiError(
          500,
          `${(err as Error).message}; the tunnel was closed again and not created`,
        );
      }
      this.watch(entry, endpoint);
      this.options.logger.info(
        record.protocol === 'labeled'
          ? { labels: record.labels, forwards_to: record.forwards_to }
          : {
              url: record.url,
              forwards_to: record.forwards_to,
              policy: record.policy === null ? 'default' : 'own',
              options: Object.keys(record.options ?? {}),
            },
        'tunnel created',
      );
      return createdView(record);
    });
  }

  remove(part: string): Promise<void> {
    return this.exclusive(async () => {
      const records = new Map([...this.entries].map(([key, e]) => [key, e.record]));
      const found = findTunnelKey(records, part);
      const entry = found === undefined ? undefined : this.entries.get(found);
      if (!entry) {
        throw new AgentApiError(
          404,
          `no tunnel has the url_part '${part}'; GET /tunnels lists the tunnels with their url_part`,
        );
      }
      const before = new Map(this.entries);
      this.entries.delete(tunnelKey(entry.record));
      try {
        await this.persist();
      } catch (err) {
        this.entries = before;
        throw new AgentApiError(500, `${(err as Error).message}; the tunnel was not deleted`);
      }
      entry.removed = true;
      clearTimeout(entry.retry);
      const endpoint = entry.endpoint;
      entry.endpoint = undefined;
      if (endpoint) {
        // The SDK forgets the endpoint even when the server cannot be told: it is not bound again.
        await endpoint
          .close()
          .catch((err: unknown) =>
            this.options.logger.warn(
              { tunnel: tunnelName(entry.record), err: describeError(err) },
              'the server was not told about the deleted tunnel; it goes offline with the session',
            ),
          );
      }
      this.options.logger.info({ tunnel: tunnelName(entry.record) }, 'tunnel deleted');
    });
  }

  /** Close the session (tunnels go offline, the state file keeps them) and stop retrying. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pause.wake();
    this.exposure?.close();
    for (const entry of this.entries.values()) clearTimeout(entry.retry);
    await this.session?.close();
  }

  // ---- connecting ------------------------------------------------------------------------------

  private async run(): Promise<void> {
    const { logger, serverAddr } = this.options;
    for (let attempt = 0; !this.closed; attempt++) {
      try {
        const session = await this.options.connect();
        if (this.closed) {
          await session.close();
          return;
        }
        this.attach(session);
        break;
      } catch (err) {
        if (isRefusal(err)) {
          this.emit(
            'fatal',
            new Error(`the server at ${serverAddr} refused the agent: ${describeError(err)}`),
          );
          return;
        }
        const delay = backoffDelay(attempt, this.retry.initialDelay, this.retry.maxDelay);
        logger.warn(
          { server: serverAddr, err: describeError(err), retry_in_ms: delay },
          'cannot reach the server; the API keeps serving and the agent retries',
        );
        await this.pause.sleep(delay);
      }
    }
    const session = this.session;
    if (this.closed || !session) return;
    logger.info({ server: serverAddr, tunnels: this.entries.size }, 'connected to the server');
    const binds = [...this.entries.values()].map((entry) => this.bindEntry(entry));
    if (this.exposure) binds.push(this.exposure.bind(session));
    await Promise.all(binds);
    if (!this.closed) this.emit('online');
  }

  private attach(session: Session): void {
    const { logger } = this.options;
    this.session = session;
    session.on('disconnected', (reason) =>
      logger.warn({ err: reason?.message }, 'lost the connection to the server; reconnecting'),
    );
    session.on('connected', ({ resumed }) => {
      if (resumed) logger.info('back online: every tunnel is bound again on its URL');
    });
    session.on('error', (err) => logger.warn({ code: err.code }, err.message));
    session.on('stop', () => {
      logger.warn('the server asked this agent to stop');
      this.emit('stop');
    });
  }

  // ---- binding ---------------------------------------------------------------------------------

  /** Bind a stored tunnel; a failure is logged and retried with backoff. */
  private async bindEntry(entry: Entry): Promise<void> {
    const session = this.session;
    if (!session || this.closed || entry.removed || entry.endpoint || entry.binding) return;
    entry.binding = true;
    const { logger } = this.options;
    try {
      const endpoint = await openTunnelEndpoint(
        session,
        entry.record,
        entry.target,
        this.options.defaultPolicy,
      );
      if (entry.removed || this.closed) {
        await endpoint.close().catch(() => undefined);
        return;
      }
      entry.endpoint = endpoint;
      entry.attempt = 0;
      this.watch(entry, endpoint);
      const { record } = entry;
      const where =
        record.protocol === 'labeled' ? { labels: record.labels } : { url: endpoint.url };
      logger.info({ ...where, forwards_to: record.forwards_to }, 'tunnel restored');
      if (record.protocol !== 'labeled' && endpoint.url !== record.url) {
        await this.moveUrl(entry, endpoint.url!);
      }
    } catch (err) {
      if (entry.removed || this.closed) return;
      const delay = backoffDelay(entry.attempt++, this.retry.initialDelay, this.retry.maxDelay);
      logger.error(
        { tunnel: tunnelName(entry.record), err: describeError(err), retry_in_ms: delay },
        'cannot bring a stored tunnel online; retrying',
      );
      entry.retry = setTimeout(() => void this.bindEntry(entry), delay);
    } finally {
      entry.binding = false;
    }
  }

  /** The server gave another URL than the stored one (its HTTPS port changed): store the new one. */
  private moveUrl(entry: Entry, url: string): Promise<void> {
    return this.exclusive(async () => {
      const before = entry.record;
      if (entry.removed || before.protocol === 'labeled') return;
      entry.record = { ...before, url, url_part: urlPart(url, before.protocol) };
      const rebuilt = new Map<string, Entry>();
      for (const [key, e] of this.entries) rebuilt.set(e === entry ? tunnelKey(e.record) : key, e);
      this.entries = rebuilt;
      this.options.logger.warn(
        { was: before.url, now: url },
        'a stored tunnel came back on another URL',
      );
      await this.persist().catch((err: unknown) =>
        this.options.logger.error({ err: describeError(err) }, 'cannot save the new URL'),
      );
    });
  }

  private watch(entry: Entry, endpoint: Endpoint): void {
    const { logger } = this.options;
    this.options.onEndpoint?.(entry.record, entry.target, endpoint);
    endpoint.on('close', (err) => {
      if (entry.endpoint === endpoint) entry.endpoint = undefined;
      if (err) {
        logger.warn(
          { tunnel: tunnelName(entry.record), err: describeError(err) },
          'the server stopped a tunnel; it stays offline until the agent restarts or it is created again',
        );
      }
    });
    endpoint.on('forward-error', (err, info) =>
      logger.warn(
        { tunnel: tunnelName(entry.record), client: info.clientAddr, err: err.message },
        'forward failed',
      ),
    );
  }

  // ---- helpers ---------------------------------------------------------------------------------

  private persist(): Promise<void> {
    return this.options.state.save([...this.entries.values()].map((e) => e.record));
  }

  /** Run `fn` after every change before it: changes and their writes never interleave. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn);
    this.lock = run.catch(() => undefined);
    return run;
  }
}
