import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BurrowError, CODES } from '../core/errors.js';
import {
  narrowerRole,
  roleGrants,
  scopesAllow,
  type Permission,
  type Role,
} from '../core/roles.js';
import { ROUTE_PERMISSIONS, type RouteRule } from './route-permissions.js';

/**
 * Who is asking, as far as permissions go: set by auth.ts for every authenticated request, from
 * the API key (its owner's role read from the store on every request, narrowed by the key's own
 * role) or the dashboard session (the user's role).
 */
export interface Principal {
  /** The key's owner or the signed-in user: whose keys count as "own". */
  ownerId: string;
  /** What the request may do: the owner's role, or the key's narrower one. */
  role: Role;
  /** The permissions the key is limited to; null: every one `role` grants. */
  scopes: readonly Permission[] | null;
  /** The key's own role when it narrows its owner's, else null (sessions: null). */
  keyRole: Role | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated principal; undefined on public routes. */
    access: Principal | undefined;
  }
}

/** The principal of a key: its owner's role narrowed by the key's. */
export function keyPrincipal(
  ownerId: string,
  ownerRole: Role,
  key: { role: Role | null; scopes: readonly Permission[] | null },
): Principal {
  return {
    ownerId,
    role: key.role === null ? ownerRole : narrowerRole(ownerRole, key.role),
    scopes: key.scopes,
    keyRole: key.role,
  };
}

/** Whether `principal` holds `permission`: its role grants it and its scopes allow it. */
export function holds(principal: Principal, permission: Permission): boolean {
  return roleGrants(principal.role, permission) && scopesAllow(principal.scopes, permission);
}

/** What `'<METHOD> <route>'` needs; undefined when the route is not in the table. */
export function ruleOf(method: string, route: string): RouteRule | undefined {
  const m = method === 'HEAD' ? 'GET' : method;
  return ROUTE_PERMISSIONS[`${m} ${route}`];
}

function denied(principal: Principal, need: string, why: string): BurrowError {
  return new BurrowError(
    CODES.permissionDenied,
    403,
    `This needs ${need}, which ${why}. Ask an admin for a wider role, or use a key with that scope.`,
    { required: need, role: principal.role },
  );
}

/**
 * Refuse `principal` unless it holds `permission`, naming what was needed and what is missing.
 * @example requirePermission(request.access, 'users:write');
 */
export function requirePermission(principal: Principal, permission: Permission): void {
  if (!roleGrants(principal.role, permission)) {
    throw denied(principal, permission, `the role ${principal.role} does not grant`);
  }
  if (!scopesAllow(principal.scopes, permission)) {
    throw denied(
      principal,
      permission,
      `this API key's scopes (${principal.scopes?.join(', ') ?? ''}) do not include`,
    );
  }
}

/** Admin, without scopes that leave anything out: what a route missing from the table needs. */
function requireUnlimitedAdmin(principal: Principal, route: string): void {
  if (principal.role !== 'admin' || principal.scopes !== null) {
    throw denied(
      principal,
      `an admin key without scopes (${route} has no permission listed)`,
      'this is not',
    );
  }
}

/** Every `'<METHOD> <route>'` each app registered, for the test that all are in the table. */
const REGISTERED = new WeakMap<FastifyInstance, Set<string>>();

/** The routes `app` registered after installPermissions, as `'<METHOD> <route>'` (HEAD left out). */
export function registeredRoutes(app: FastifyInstance): string[] {
  return [...(REGISTERED.get(app) ?? [])].sort();
}

/**
 * Check every authenticated request against ROUTE_PERMISSIONS before its body is read. Runs after
 * auth.ts's hook (which sets `request.access`); a request to no route (404) is let through, since
 * there is nothing to guard, and the not-found handler answers it.
 * @example installPermissions(app);
 */
export function installPermissions(app: FastifyInstance): void {
  app.decorateRequest('access', undefined);
  const registered = new Set<string>();
  REGISTERED.set(app, registered);
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) {
      if (method === 'HEAD') continue;
      registered.add(`${method} ${route.url}`);
      // Not fatal here (a route missing from the table is served to unlimited admins only), but
      // said at start, and route-permissions.test.ts fails.
      if (ruleOf(method, route.url) === undefined) {
        app.log.warn({ route: route.url, method }, 'route missing from ROUTE_PERMISSIONS');
      }
    }
  });
  app.addHook('onRequest', async (request: FastifyRequest) => {
    const principal = request.access;
    const route = request.routeOptions.url;
    if (principal === undefined || route === undefined || request.is404) return;
    const rule = ruleOf(request.method, route);
    if (rule === 'public' || rule === 'signed_in') return;
    if (rule === undefined) {
      request.log.warn({ route, method: request.method }, 'route missing from ROUTE_PERMISSIONS');
      requireUnlimitedAdmin(principal, `${request.method} ${route}`);
      return;
    }
    requirePermission(principal, rule);
  });
}
