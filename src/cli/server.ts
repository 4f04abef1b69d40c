import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../core/config.js';
import { splitHostPort } from '../core/hostname.js';
import { createLogger, type Logger } from '../core/logger.js';
import { buildApi } from '../api/app.js';
import { createRepositories, openStore, type Repositories, type Store } from '../store/index.js';

/** A running `burrow server`. */
export interface RunningServer {
  config: ServerConfig;
  store: Store;
  repos: Repositories;
  api: FastifyInstance | undefined;
  /** The API's bound address (host:port), with the real port when 0 was asked for. */
  apiAddress: string | undefined;
  close(): Promise<void>;
}

/** The repositories' view of the server configuration. */
export function storeSettings(config: ServerConfig) {
  return {
    baseDomain: config.baseDomain,
    tcpHost: config.tcpHost,
    tcpPorts: config.tcpPorts,
    httpsPort: splitHostPort(config.httpsListen)!.port,
  };
}

/**
 * Start the processes `--role` asks for: the API (and, with the edge, the agent listener and
 * ingress) over one store.
 */
export async function startServer(
  config: ServerConfig,
  logger: Logger = createLogger(config.logLevel),
): Promise<RunningServer> {
  const store = await openStore({ database: config.database, dataDir: config.dataDir });
  const repos = createRepositories(store, storeSettings(config));
  let api: FastifyInstance | undefined;
  let apiAddress: string | undefined;
  try {
    if (config.role !== 'edge') {
      api = await buildApi({
        repos,
        publicApiUrl: config.publicApiUrl,
        rateLimit: config.apiRateLimit,
        logger: logger.child({ component: 'api' }),
      });
      const { host, port } = splitHostPort(config.apiListen)!;
      await api.listen({ host: host.replace(/^\[|\]$/g, ''), port });
      const addr = api.server.address();
      apiAddress = addr && typeof addr === 'object' ? `${host}:${addr.port}` : config.apiListen;
      logger.info({ address: apiAddress, database: store.location }, 'API listening');
      if ((await repos.apiKeys.count()) === 0) {
        const where = config.database
          ? `--database '${store.location}'`
          : `--data-dir '${config.dataDir}'`;
        const hint = `No API key exists yet. Create one with: burrow api-key create ${where}`;
        logger.warn(hint);
        process.stderr.write(`\n  ${hint}\n\n`);
      }
    }
  } catch (err) {
    await api?.close();
    await store.close();
    throw err;
  }
  return {
    config,
    store,
    repos,
    api,
    apiAddress,
    async close() {
      await api?.close();
      await store.close();
    },
  };
}
