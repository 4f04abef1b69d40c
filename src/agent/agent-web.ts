/**
 * The agent API and inspector of one agent session: its named tunnels, its request log and the
 * listener on `web_addr`. `burrow http|tcp|tls` and `burrow start` start it (src/cli/agent-web.ts).
 */
import type { Logger } from '../core/logger.js';
import type { Session } from '../sdk/session.js';
import { NamedTunnels } from './named-tunnels.js';
import { DEFAULT_LOG_BYTES, RequestLog } from './request-log.js';
import { listenWebAddr, type WebListener } from './web-access.js';
import { webApi } from './web-api.js';

export interface AgentWebOptions {
  /** The session, or how to find the current one (the device agent's). */
  session: Session | (() => Session | undefined);
  /** Tunnels are made elsewhere: starting and stopping them here is refused with this message. */
  readOnly?: string;
  /** `web_addr`: host:port, a port, `false` (no listener), undefined (127.0.0.1:4040). */
  webAddr: string | false | undefined;
  /** `--web-auth user:password`: required on every request (and to listen beyond loopback). */
  credential: string | undefined;
  /** `inspect_db_size`: bytes of captured requests kept. */
  logBytes?: number;
  version: string;
  warn: (line: string) => void;
  logger?: Logger;
}

/** A running agent API: its tunnels, its log, and where it listens (undefined when off). */
export interface AgentWeb {
  tunnels: NamedTunnels;
  log: RequestLog;
  listener: WebListener | undefined;
  close(): Promise<void>;
}

/**
 * Make the tunnels and log of `session` and serve them on `webAddr`.
 * @example const web = await startAgentWeb({ session, webAddr: undefined, credential: undefined, version, warn });
 */
export async function startAgentWeb(options: AgentWebOptions): Promise<AgentWeb> {
  const log = new RequestLog(options.logBytes ?? DEFAULT_LOG_BYTES);
  const tunnels = new NamedTunnels(options.session, log, options.readOnly);
  const access = { credential: options.credential };
  const handler = webApi({
    tunnels,
    log,
    access,
    version: options.version,
    logger: options.logger,
  });
  const listener = await listenWebAddr(handler, options.webAddr, access, options.warn);
  return {
    tunnels,
    log,
    listener,
    close: async () => {
      await listener?.close();
    },
  };
}
