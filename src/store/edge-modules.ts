import { parseDocument } from 'yaml';
import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { quote } from '../core/quote.js';
import type { Db, TrafficPolicyValidator } from './deps.js';
import { missingIds } from './refs.js';

/** The two kinds of edge this store keeps. */
export type EdgeType = 'tcp' | 'tls';

/** Every module name, in the order edges show them. */
export type ModuleName =
  'backend' | 'ip_restriction' | 'mutual_tls' | 'tls_termination' | 'traffic_policy';

/**
 * The modules each edge type carries.
 * @example EDGE_MODULES.tcp.includes('mutual_tls') // false
 */
export const EDGE_MODULES: Readonly<Record<EdgeType, readonly ModuleName[]>> = {
  tcp: ['backend', 'ip_restriction', 'traffic_policy'],
  tls: ['backend', 'ip_restriction', 'mutual_tls', 'tls_termination', 'traffic_policy'],
};

export const TLS_MIN_VERSIONS = ['1.0', '1.1', '1.2', '1.3'] as const;
export const TERMINATE_AT = ['edge', 'upstream'] as const;

/* Stored shapes: the Mutate shape with `enabled` resolved. The API turns ids into refs. */
export interface BackendModule {
  enabled: boolean;
  backend_id: string;
}
export interface IpRestrictionModule {
  enabled: boolean;
  ip_policy_ids: string[];
}
export interface TrafficPolicyModule {
  enabled: boolean;
  value: string;
}
export interface MutualTlsModule {
  enabled: boolean;
  certificate_authority_ids: string[];
}
export interface TlsTerminationModule {
  enabled: boolean;
  terminate_at: (typeof TERMINATE_AT)[number];
  min_version: (typeof TLS_MIN_VERSIONS)[number] | null;
}

/** Every module of an edge; null when unset. TCP edges never have mutual_tls or tls_termination. */
export interface EdgeModules {
  backend: BackendModule | null;
  ip_restriction: IpRestrictionModule | null;
  mutual_tls: MutualTlsModule | null;
  tls_termination: TlsTerminationModule | null;
  traffic_policy: TrafficPolicyModule | null;
}

/* Mutate shapes: what create, PATCH and PUT take. `enabled` defaults to true. */
export interface BackendMutate {
  enabled?: boolean | undefined;
  backend_id: string;
}
export interface IpRestrictionMutate {
  enabled?: boolean | undefined;
  ip_policy_ids: string[];
}
export interface TrafficPolicyMutate {
  enabled?: boolean | undefined;
  value: string;
}
export interface MutualTlsMutate {
  enabled?: boolean | undefined;
  certificate_authority_ids: string[];
}
export interface TlsTerminationMutate {
  enabled?: boolean | undefined;
  terminate_at: string;
  min_version?: string | null | undefined;
}

/** The Mutate shape of each module, by name. */
export interface ModuleMutates {
  backend: BackendMutate;
  ip_restriction: IpRestrictionMutate;
  mutual_tls: MutualTlsMutate;
  tls_termination: TlsTerminationMutate;
  traffic_policy: TrafficPolicyMutate;
}

/** How a field is named in errors: `ip_restriction.ip_policy_ids[0]` in edge bodies, `ip_policy_ids[0]` in PUT. */
export type FieldPrefix = '' | `${ModuleName}.`;

/**
 * A module's list of ids at `field`, copied: refused (`empty`) when it is empty, and when an id
 * is listed twice.
 * @example idList(['ipp_a'], 'ip_restriction.ip_policy_ids', { code, message: 'must list one' }) // ['ipp_a']
 */
function idList(ids: string[], field: string, empty: { code: string; message: string }): string[] {
  if (ids.length === 0) throw new ValidationError(empty.code, field, empty.message);
  noDuplicates(ids, field);
  return [...ids];
}

function noDuplicates(ids: string[], field: string): void {
  const seen = new Set<string>();
  ids.forEach((id, i) => {
    if (seen.has(id)) {
      throw new ValidationError(
        CODES.invalidValue,
        `${field}[${i}]`,
        `${quote(id)} is listed twice`,
      );
    }
    seen.add(id);
  });
}

/**
 * The check a store without the policy engine falls back to: the text must be a JSON or YAML
 * mapping (YAML 1.2 reads both). What the rules mean is left to the injected validator.
 * @example checkPolicyWellFormed('[1]', 'tcp', 'value') // throws ERR_NGROK_2236
 */
export const checkPolicyWellFormed: TrafficPolicyValidator = (text, _protocol, field) => {
  let value: unknown;
  try {
    const doc = parseDocument(text, { uniqueKeys: true });
    if (doc.errors[0]) throw doc.errors[0];
    // toJS refuses aliases that expand excessively, so a small text cannot balloon.
    value = doc.toJS();
  } catch (err) {
    const reason = (err as Error).message.split('\n')[0];
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      `cannot parse the traffic policy as JSON or YAML: ${reason}`,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError(
      CODES.policyUnparseable,
      field,
      'the traffic policy must be a JSON or YAML mapping of rule lists',
    );
  }
};

/**
 * Turn a module's Mutate shape into its stored shape, checking everything that needs no database:
 * list rules, enumerations and the traffic policy document (with `validatePolicy`, or only its
 * well-formedness when the store was built without one).
 * @example normalizeModule('backend', { backend_id: 'bkdtg_…' }, 'backend.', 'tcp') // { enabled: true, backend_id: 'bkdtg_…' }
 */
export function normalizeModule<N extends ModuleName>(
  name: N,
  input: ModuleMutates[N],
  prefix: FieldPrefix,
  edgeType: EdgeType,
  validatePolicy: TrafficPolicyValidator = checkPolicyWellFormed,
): NonNullable<EdgeModules[N]> {
  // normalize() returns the stored shape of `name` itself; TypeScript cannot follow that through a switch.
  return normalize(name, input, prefix, edgeType, validatePolicy) as NonNullable<EdgeModules[N]>;
}

type StoredModule = NonNullable<EdgeModules[ModuleName]>;

function normalize(
  name: ModuleName,
  input: ModuleMutates[ModuleName],
  prefix: FieldPrefix,
  edgeType: EdgeType,
  validatePolicy: TrafficPolicyValidator,
): StoredModule {
  const enabled = input.enabled !== false;
  switch (name) {
    case 'backend': {
      const m = input as BackendMutate;
      return { enabled, backend_id: m.backend_id };
    }
    case 'ip_restriction': {
      const m = input as IpRestrictionMutate;
      const ids = idList(m.ip_policy_ids, `${prefix}ip_policy_ids`, {
        code: CODES.ipRestrictionNeedsPolicy,
        message:
          'must list at least one IP policy id (ipp_…); to lift the restriction, delete the module instead',
      });
      return { enabled, ip_policy_ids: ids };
    }
    case 'mutual_tls': {
      const m = input as MutualTlsMutate;
      const ids = idList(m.certificate_authority_ids, `${prefix}certificate_authority_ids`, {
        code: CODES.invalidValue,
        message:
          'must list at least one certificate authority id (ca_…); to stop checking client certificates, delete the module instead',
      });
      return { enabled, certificate_authority_ids: ids };
    }
    case 'tls_termination': {
      const m = input as TlsTerminationMutate;
      const at = m.terminate_at;
      if (!(TERMINATE_AT as readonly string[]).includes(at)) {
        throw new ValidationError(
          CODES.invalidTerminateAt,
          `${prefix}terminate_at`,
          `must be 'edge' (the edge terminates TLS) or 'upstream' (TLS passes through to the agent's service), got ${quote(at)}`,
        );
      }
      const min = m.min_version ?? null;
      if (min !== null && !(TLS_MIN_VERSIONS as readonly string[]).includes(min)) {
        throw new ValidationError(
          CODES.invalidValue,
          `${prefix}min_version`,
          `must be one of ${TLS_MIN_VERSIONS.map((v) => `'${v}'`).join(', ')} or null, got ${quote(min)}`,
        );
      }
      if (at === 'upstream' && min !== null) {
        throw new ValidationError(
          CODES.invalidValue,
          `${prefix}min_version`,
          "must be null when terminate_at is 'upstream': the edge does not terminate TLS, so it sets no minimum version",
        );
      }
      return {
        enabled,
        terminate_at: at as TlsTerminationModule['terminate_at'],
        min_version: min as TlsTerminationModule['min_version'],
      };
    }
    case 'traffic_policy': {
      const m = input as TrafficPolicyMutate;
      // Real servers inject the policy engine, which checks expressions, actions and phases.
      validatePolicy(m.value, edgeType, `${prefix}value`);
      return { enabled, value: m.value };
    }
  }
  throw new Error(`unknown edge module ${String(name)}`);
}

/**
 * Check that the resources a module names exist (backend, IP policies, certificate authorities).
 * @example await checkModuleReferences(trx, 'backend', { enabled: true, backend_id: 'bkdtg_x' }, 'backend.')
 */
export async function checkModuleReferences<N extends ModuleName>(
  db: Db,
  name: N,
  module: NonNullable<EdgeModules[N]>,
  prefix: FieldPrefix,
): Promise<void> {
  if (name === 'backend') {
    const id = (module as BackendModule).backend_id;
    if ((await missingIds(db, 'backends', [id])).length > 0) {
      throw new ValidationError(
        CODES.backendNotFound,
        `${prefix}backend_id`,
        `Backend not found: no backend has the id ${quote(id)}. Create one (e.g. POST /backends/tunnel_group) and use its id.`,
      );
    }
  } else if (name === 'ip_restriction') {
    const ids = (module as IpRestrictionModule).ip_policy_ids;
    const [missing] = await missingIds(db, 'ip_policies', ids);
    if (missing !== undefined) {
      const i = ids.indexOf(missing);
      throw new ValidationError(
        CODES.ipPolicyNotFound,
        `${prefix}ip_policy_ids[${i}]`,
        `no IP policy has the id ${quote(missing)}. Create one with POST /ip_policies and use its id.`,
      );
    }
  } else if (name === 'mutual_tls') {
    const ids = (module as MutualTlsModule).certificate_authority_ids;
    const [missing] = await missingIds(db, 'certificate_authorities', ids);
    if (missing !== undefined) {
      const i = ids.indexOf(missing);
      throw new ValidationError(
        CODES.caNotFound,
        `${prefix}certificate_authority_ids[${i}]`,
        `no certificate authority has the id ${quote(missing)}. Upload one with POST /certificate_authorities and use its id.`,
      );
    }
  }
}

/** Ids of every resource the modules reference, for the `refs` table. */
export function referencedIds(modules: EdgeModules): string[] {
  return [
    ...(modules.backend ? [modules.backend.backend_id] : []),
    ...(modules.ip_restriction?.ip_policy_ids ?? []),
    ...(modules.mutual_tls?.certificate_authority_ids ?? []),
  ];
}

/**
 * Mutual TLS checks client certificates during the handshake, so it only works where the edge
 * terminates TLS. `changed` says which module the caller just wrote, to blame the right field.
 */
export function checkTermination(
  edgeId: string,
  modules: EdgeModules,
  changed: ModuleName[],
): void {
  const mtls = modules.mutual_tls;
  if (!mtls?.enabled) return;
  const term = modules.tls_termination;
  if (term?.enabled && term.terminate_at === 'edge') return;
  const path = `/edges/tls/${edgeId}/tls_termination`;
  if (changed.includes('tls_termination') && !changed.includes('mutual_tls')) {
    throw new ValidationError(
      CODES.moduleNeedsTermination,
      'tls_termination',
      `mutual_tls is enabled on this edge and needs TLS terminated at the edge: keep tls_termination enabled with terminate_at 'edge', or delete mutual_tls first (DELETE /edges/tls/${edgeId}/mutual_tls).`,
    );
  }
  throw new ValidationError(
    CODES.moduleNeedsTermination,
    'mutual_tls',
    `mutual_tls needs TLS terminated at the edge: set tls_termination first with {"terminate_at": "edge"} (PUT ${path}, or in the same request), then enable mutual_tls.`,
  );
}

/** Refuse to remove tls_termination while an enabled mutual_tls module depends on it. */
export function checkTerminationRemoval(edgeId: string, modules: EdgeModules): void {
  if (modules.mutual_tls?.enabled) {
    throw new ConflictError(
      CODES.moduleNeedsTermination,
      `tls_termination cannot be deleted while mutual_tls is enabled on edge ${edgeId}: mutual TLS needs TLS terminated at the edge. Delete mutual_tls first (DELETE /edges/tls/${edgeId}/mutual_tls).`,
    );
  }
}
