/**
 * Roles and scopes: what a dashboard user, and each API key, may do (src/api/permissions.ts
 * enforces them on every route). A permission is `<resource>:read` or `<resource>:write`; write
 * includes read of the same resource.
 *
 * - `admin`: everything.
 * - `operator`: tunnels, endpoints, edges, domains, addresses, policies, backends, certificates,
 *   vaults, authtokens; their own API keys only; no users, no bot users' changes, no audit trail.
 * - `viewer`: reads only, of what holds no secret: no users, no audit trail, no one else's keys.
 *
 * A key carries its owner's role or a narrower one (`role`), and may be limited further to some
 * permissions (`scopes`); a request may do what every one of the three allows.
 */
import { ValidationError, CODES } from './errors.js';

export const ROLES = ['admin', 'operator', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/** The resources permissions and scopes name: one per group of API routes. */
export const RESOURCES = [
  'api_keys',
  'audit_events',
  'backends',
  'bot_users',
  'certificate_authorities',
  'credentials',
  'edges',
  'endpoints',
  'events',
  'ip_policies',
  'reserved_addrs',
  'reserved_domains',
  'tls_certificates',
  'traffic',
  'tunnel_sessions',
  'tunnels',
  'users',
  'vaults',
] as const;
export type Resource = (typeof RESOURCES)[number];
export type Access = 'read' | 'write';
export type Permission = `${Resource}:${Access}`;

/** Every permission there is, for checks and docs. */
export const PERMISSIONS: readonly Permission[] = RESOURCES.flatMap((r) => [
  `${r}:read` as const,
  `${r}:write` as const,
]);

/** What only an admin may touch at all. */
const ADMIN_ONLY: ReadonlySet<Resource> = new Set(['users', 'audit_events']);
/** What an operator may read but not change (bot users are users). */
const OPERATOR_READ_ONLY: ReadonlySet<Resource> = new Set(['bot_users']);

/** Whether `role` grants `permission` (before a key's scopes, and the own-keys rule of api-keys.ts). */
export function roleGrants(role: Role, permission: Permission): boolean {
  if (role === 'admin') return true;
  const [resource, access] = permission.split(':') as [Resource, Access];
  if (ADMIN_ONLY.has(resource)) return false;
  if (role === 'viewer') return access === 'read';
  return access === 'read' || !OPERATOR_READ_ONLY.has(resource);
}

/** How much a role allows: viewer < operator < admin. */
function rank(role: Role): number {
  return ROLES.length - ROLES.indexOf(role);
}

/** The narrower of two roles. */
export function narrowerRole(a: Role, b: Role): Role {
  return rank(a) <= rank(b) ? a : b;
}

/** Whether `role` allows no more than `limit`. */
export function roleWithin(role: Role, limit: Role): boolean {
  return rank(role) <= rank(limit);
}

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}

/** A role from user input; `field` names it in the error. */
export function parseRole(value: string, field = 'role'): Role {
  if (!isRole(value)) {
    throw new ValidationError(CODES.invalidValue, field, `must be one of ${ROLES.join(', ')}`);
  }
  return value;
}

/** Whether a key's `scopes` (undefined or null: unlimited) allow `permission`. */
export function scopesAllow(
  scopes: readonly Permission[] | null | undefined,
  permission: Permission,
): boolean {
  if (scopes === null || scopes === undefined) return true;
  if (scopes.includes(permission)) return true;
  const [resource, access] = permission.split(':') as [Resource, Access];
  return access === 'read' && scopes.includes(`${resource}:write`);
}

/** The most scopes a key may list. */
export const SCOPES_MAX = PERMISSIONS.length;

/** A list of scopes from user input, deduplicated and sorted; `field` names it in errors. */
export function parseScopes(value: readonly string[], field = 'scopes'): Permission[] {
  if (value.length === 0) {
    throw new ValidationError(
      CODES.invalidValue,
      field,
      'a key needs at least one scope; leave scopes out for every resource its role allows',
    );
  }
  const out = new Set<Permission>();
  for (const [i, scope] of value.entries()) {
    if (!(PERMISSIONS as readonly string[]).includes(scope)) {
      throw new ValidationError(
        CODES.invalidValue,
        `${field}[${i}]`,
        `a scope is <resource>:read or <resource>:write, with resource one of ${RESOURCES.join(', ')}`,
      );
    }
    out.add(scope as Permission);
  }
  return [...out].sort();
}
