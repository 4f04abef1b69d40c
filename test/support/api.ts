import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import { buildApi, type ApiOptions } from '../../src/api/app.js';
import type { OnlineState } from '../../src/api/context.js';
import { validatePolicy } from '../../src/policy/validate.js';
import {
  createRepositories,
  openStore,
  type Repositories,
  type Store,
  type StoreSettings,
} from '../../src/store/index.js';
import { createTestDatabase, type TestDatabase } from './stores.js';

export const TEST_BASE_URL = 'http://api.test';

export const TEST_STORE_SETTINGS: StoreSettings = {
  baseDomain: 'burrow.test',
  tcpHost: 'tcp.burrow.test',
  tcpPorts: { first: 20000, last: 20999 },
  httpsPort: 8443,
};

/**
 * The repositories over `store` as a real server builds them: test settings (with `settings`
 * overriding) and the policy engine validating traffic policies on save.
 * @example const repos = createTestRepositories(store, { tcpPorts: { first: 40000, last: 40004 } });
 */
export function createTestRepositories(
  store: Store,
  settings: Partial<StoreSettings> = {},
): Repositories {
  return createRepositories(
    store,
    { ...TEST_STORE_SETTINGS, ...settings },
    { validateTrafficPolicy: validatePolicy },
  );
}

/** A store over a fresh database, with its repositories; read the fields inside tests and hooks. */
export interface TestStore {
  readonly db: TestDatabase;
  readonly store: Store;
  readonly repos: Repositories;
}

/**
 * Open a store over a fresh database of `kind` in `beforeAll` (repositories as in
 * `createTestRepositories(store, settings)`), close and drop it in `afterAll`. A suite's own
 * `beforeAll` registered after this call runs once the store is open.
 * (Here rather than in stores.ts, which this module already imports.)
 * @example
 * const t = withTestStore(kind);
 * it('creates', async () => expect(await t.repos.credentials.create({})).toBeDefined());
 */
export function withTestStore(
  kind: TestDatabase['name'],
  settings: Partial<StoreSettings> = {},
): TestStore {
  const opened = {} as { db: TestDatabase; store: Store; repos: Repositories };
  beforeAll(async () => {
    opened.db = await createTestDatabase(kind);
    opened.store = await openStore({ database: opened.db.database, dataDir: opened.db.dataDir });
    opened.repos = createTestRepositories(opened.store, settings);
  });
  afterAll(async () => {
    await opened.store?.close();
    await opened.db?.drop();
  });
  return opened;
}

/** An in-process API over a fresh database, with an API key, for route tests. */
export interface TestApi {
  app: FastifyInstance;
  repos: Repositories;
  store: Store;
  db: TestDatabase;
  key: string;
  /** Send a request with the key and version header (unless overridden in `headers`). */
  call(
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string | undefined>,
  ): Promise<TestReply>;
  close(): Promise<void>;
}

export interface TestReply {
  status: number;
  headers: LightMyRequestResponse['headers'];
  // Replies are JSON of many shapes; tests narrow them by assertion.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

export interface TestApiOptions {
  rateLimit?: { max: number; windowSeconds: number };
  settings?: Partial<StoreSettings>;
  online?: OnlineState;
  limits?: ApiOptions['limits'];
  refused?: ApiOptions['refused'];
}

/** Open `kind`'s database, build the API over it, create an API key. */
export async function createTestApi(
  kind: 'sqlite' | 'postgres',
  options: TestApiOptions = {},
): Promise<TestApi> {
  const db = await createTestDatabase(kind);
  const store = await openStore({ database: db.database, dataDir: db.dataDir });
  const repos = createTestRepositories(store, options.settings);
  const app = await buildApi({
    repos,
    publicApiUrl: TEST_BASE_URL,
    rateLimit: options.rateLimit ?? { max: 0, windowSeconds: 60 },
    online: options.online,
    limits: options.limits,
    refused: options.refused,
  });
  const key = (await repos.apiKeys.create({ description: 'test' })).token!;
  return {
    app,
    repos,
    store,
    db,
    key,
    async call(method, path, body, headers = {}) {
      const h: Record<string, string> = { authorization: `Bearer ${key}`, 'service-version': '2' };
      if (body !== undefined) h['content-type'] = 'application/json';
      for (const [k, v] of Object.entries(headers)) {
        if (v === undefined) delete h[k.toLowerCase()];
        else h[k.toLowerCase()] = v;
      }
      const res = await app.inject({
        method: method as 'GET',
        url: path,
        headers: h,
        payload:
          body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      });
      return {
        status: res.statusCode,
        headers: res.headers,
        body: res.body ? (JSON.parse(res.body) as unknown) : undefined,
      };
    },
    async close() {
      await app.close();
      await store.close();
      await db.drop();
    },
  };
}
