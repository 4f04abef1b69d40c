import { isIP } from 'node:net';
import { CODES, ValidationError } from '../core/errors.js';
import { ID_PREFIX, type IdPrefix } from '../core/ids.js';
import { parseHostPort } from '../core/host-port.js';
import { LABEL_LIMITS, labelProblem } from '../core/labels.js';
import { quote, shorten } from '../core/quote.js';
import { missingIds } from './refs.js';
import type { Db } from './deps.js';

/** The backend types Burrow stores, all in the one `backends` table. */
export type BackendType = 'tunnel_group' | 'failover' | 'weighted' | 'static';

/** Fields every backend has. */
export interface BackendCommon {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
}

export interface TunnelGroupConfig {
  /** Selector: a tunnel matches when its labels include every one of these. */
  labels: Record<string, string>;
}
export interface FailoverConfig {
  /** Backend ids, tried in order. */
  backends: string[];
}
export interface WeightedConfig {
  /** Backend id to weight, 0..10000. */
  backends: Record<string, number>;
}
export interface StaticConfig {
  /** `host:port` to dial. */
  address: string;
  tls: { enabled: boolean };
}

// `labels?: undefined` on the other types lets callers read `backend.labels` on any backend.
export type TunnelGroupBackend = BackendCommon & { type: 'tunnel_group' } & TunnelGroupConfig;
export type FailoverBackend = BackendCommon & {
  type: 'failover';
  labels?: undefined;
} & FailoverConfig;
export type WeightedBackend = BackendCommon & {
  type: 'weighted';
  labels?: undefined;
} & WeightedConfig;
export type StaticBackend = BackendCommon & { type: 'static'; labels?: undefined } & StaticConfig;
/** Any backend, discriminated by `type`. */
export type Backend = TunnelGroupBackend | FailoverBackend | WeightedBackend | StaticBackend;

export interface CommonInput {
  description?: string | undefined;
  metadata?: string | undefined;
}
export type TunnelGroupCreate = CommonInput & TunnelGroupConfig;
export type TunnelGroupUpdate = CommonInput & Partial<TunnelGroupConfig>;
export type FailoverCreate = CommonInput & FailoverConfig;
export type FailoverUpdate = CommonInput & Partial<FailoverConfig>;
export type WeightedCreate = CommonInput & WeightedConfig;
export type WeightedUpdate = CommonInput & Partial<WeightedConfig>;
export interface StaticCreate extends CommonInput {
  address: string;
  tls?: { enabled?: boolean | undefined } | undefined;
}
export type StaticUpdate = Partial<StaticCreate>;

export const MAX_WEIGHT = 10000;

/**
 * How one backend type checks its fields and which backends it references. `config` returns the
 * type's stored fields, or undefined when the input changes none of them (a PATCH without them).
 */
export interface BackendKind<Cfg, C extends CommonInput, U extends CommonInput> {
  type: BackendType;
  prefix: IdPrefix;
  fromCreate(db: Db, id: string, input: C): Promise<Cfg>;
  fromUpdate(db: Db, id: string, current: Cfg, patch: U): Promise<Cfg | undefined>;
  /** Ids of the backends this one uses, recorded in `refs`. */
  members(config: Cfg): string[];
}

/**
 * Check a tunnel-group label selector: 1..10 labels, keys and values within LABEL_LIMITS, no '='.
 * @example checkLabels({ app: 'web' }) // { app: 'web' }
 */
export function checkLabels(labels: Record<string, string>): Record<string, string> {
  const entries = Object.entries(labels);
  if (entries.length === 0) {
    throw new ValidationError(
      CODES.backendLabelCount,
      'labels',
      'must have at least one label; a tunnel group selects tunnels by their labels',
    );
  }
  if (entries.length > LABEL_LIMITS.maxLabels) {
    throw new ValidationError(
      CODES.backendLabelCount,
      'labels',
      `may have at most ${LABEL_LIMITS.maxLabels} labels; got ${entries.length}`,
    );
  }
  for (const [key, value] of entries) {
    const problem = labelProblem(key, value);
    if (!problem) continue;
    const code =
      problem.rule === 'equals'
        ? CODES.backendLabelEquals
        : problem.part === 'key'
          ? CODES.backendLabelKey
          : CODES.backendLabelValue;
    throw new ValidationError(
      code,
      problem.part === 'key' ? 'labels' : `labels.${key}`,
      problem.message,
    );
  }
  return { ...labels };
}

const HOST_LABEL_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Check a static backend's `host:port` (a DNS name, one label allowed, or an IP; IPv6 in
 * brackets) and return it with the host lowercased.
 * @example checkAddress('Web.internal:8080') // 'web.internal:8080'
 */
export function checkAddress(address: string): string {
  const hp = parseHostPort(address, { minPort: 1, keepBrackets: true });
  const host = hp?.host.toLowerCase() ?? '';
  const hostOk = host.startsWith('[')
    ? isIP(host.slice(1, -1)) === 6
    : isIP(host) === 4 ||
      (host.length <= 253 && host.split('.').every((label) => HOST_LABEL_RE.test(label)));
  if (!hp || !hostOk) {
    throw new ValidationError(
      CODES.invalidValue,
      'address',
      `must be '<host>:<port>' with a DNS name or IP address (IPv6 in brackets) and a port from 1 to 65535; got ${quote(address)}`,
    );
  }
  return `${host}:${hp.port}`;
}

/** Whether `target` is reachable from `start` by following backend references. */
async function reaches(db: Db, start: string, target: string): Promise<boolean> {
  const seen = new Set<string>([start]);
  let frontier = [start];
  while (frontier.length > 0) {
    if (frontier.includes(target)) return true;
    const rows = await db
      .selectFrom('refs')
      .select('to_id')
      .where('from_id', 'in', frontier)
      .execute();
    frontier = rows.map((r) => r.to_id).filter((id) => !seen.has(id));
    for (const id of frontier) seen.add(id);
  }
  return false;
}

/**
 * Check the members of a failover or weighted backend `selfId`: at least one, no duplicates, each
 * an existing backend, and none that contains `selfId` (directly or not), which would loop.
 */
async function checkMembers(
  db: Db,
  selfId: string,
  ids: string[],
  field: (index: number, id: string) => string,
): Promise<void> {
  if (ids.length === 0) {
    throw new ValidationError(CODES.invalidValue, 'backends', 'must name at least one backend');
  }
  const missing = new Set(await missingIds(db, 'backends', ids));
  const seen = new Set<string>();
  for (const [i, id] of ids.entries()) {
    if (seen.has(id)) {
      throw new ValidationError(CODES.invalidValue, field(i, id), `lists ${quote(id)} twice`);
    }
    seen.add(id);
    if (id === selfId) {
      throw new ValidationError(
        CODES.invalidValue,
        field(i, id),
        'a backend cannot contain itself',
      );
    }
    if (missing.has(id)) {
      throw new ValidationError(
        CODES.backendNotFound,
        field(i, id),
        `Backend not found: no backend has the id ${quote(id)}`,
      );
    }
    if (await reaches(db, id, selfId)) {
      throw new ValidationError(
        CODES.invalidValue,
        field(i, id),
        `${quote(id)} already uses ${selfId}, directly or through other backends; the two would loop`,
      );
    }
  }
}

function checkWeights(backends: Record<string, number>): Record<string, number> {
  for (const [id, weight] of Object.entries(backends)) {
    if (!Number.isInteger(weight) || weight < 0 || weight > MAX_WEIGHT) {
      throw new ValidationError(
        CODES.invalidValue,
        `backends.${shorten(id)}`,
        `weight must be an integer from 0 to ${MAX_WEIGHT}; got ${weight}`,
      );
    }
  }
  return { ...backends };
}

export const TUNNEL_GROUP: BackendKind<TunnelGroupConfig, TunnelGroupCreate, TunnelGroupUpdate> = {
  type: 'tunnel_group',
  prefix: ID_PREFIX.tunnelGroupBackend,
  fromCreate: async (_db, _id, input) => ({ labels: checkLabels(input.labels) }),
  fromUpdate: async (_db, _id, _current, patch) =>
    patch.labels === undefined ? undefined : { labels: checkLabels(patch.labels) },
  members: () => [],
};

export const FAILOVER: BackendKind<FailoverConfig, FailoverCreate, FailoverUpdate> = {
  type: 'failover',
  prefix: ID_PREFIX.failoverBackend,
  async fromCreate(db, id, input) {
    await checkMembers(db, id, input.backends, (i) => `backends[${i}]`);
    return { backends: [...input.backends] };
  },
  async fromUpdate(db, id, _current, patch) {
    if (patch.backends === undefined) return undefined;
    return FAILOVER.fromCreate(db, id, { backends: patch.backends });
  },
  members: (config) => config.backends,
};

export const WEIGHTED: BackendKind<WeightedConfig, WeightedCreate, WeightedUpdate> = {
  type: 'weighted',
  prefix: ID_PREFIX.weightedBackend,
  async fromCreate(db, id, input) {
    const backends = checkWeights(input.backends);
    await checkMembers(db, id, Object.keys(backends), (_, member) => `backends.${shorten(member)}`);
    return { backends };
  },
  async fromUpdate(db, id, _current, patch) {
    if (patch.backends === undefined) return undefined;
    return WEIGHTED.fromCreate(db, id, { backends: patch.backends });
  },
  members: (config) => Object.keys(config.backends),
};

export const STATIC: BackendKind<StaticConfig, StaticCreate, StaticUpdate> = {
  type: 'static',
  prefix: ID_PREFIX.staticBackend,
  fromCreate: async (_db, _id, input) => ({
    address: checkAddress(input.address),
    tls: { enabled: input.tls?.enabled === true },
  }),
  async fromUpdate(_db, _id, current, patch) {
    if (patch.address === undefined && patch.tls === undefined) return undefined;
    return {
      address: patch.address === undefined ? current.address : checkAddress(patch.address),
      tls: patch.tls === undefined ? current.tls : { enabled: patch.tls.enabled === true },
    };
  },
  members: () => [],
};
