import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, type TestApi } from '../../test/support/api.js';
import { RESOURCES, type Resource } from '../core/roles.js';
import { registeredRoutes } from './permissions.js';
import { ROUTE_PERMISSIONS } from './route-permissions.js';

/**
 * What each role may do to each resource, written out here rather than read from roles.ts, so a
 * change to the code that grants permissions shows up as a failure (docs/security.md, Roles).
 * rw: read and write; r: read only; -: nothing.
 */
const EXPECTED: Record<Resource, { operator: 'rw' | 'r' | '-'; viewer: 'r' | '-' }> = {
  api_keys: { operator: 'rw', viewer: 'r' },
  audit_events: { operator: '-', viewer: '-' },
  backends: { operator: 'rw', viewer: 'r' },
  bot_users: { operator: 'r', viewer: 'r' },
  certificate_authorities: { operator: 'rw', viewer: 'r' },
  credentials: { operator: 'rw', viewer: 'r' },
  edges: { operator: 'rw', viewer: 'r' },
  endpoints: { operator: 'rw', viewer: 'r' },
  events: { operator: 'rw', viewer: 'r' },
  ip_policies: { operator: 'rw', viewer: 'r' },
  reserved_addrs: { operator: 'rw', viewer: 'r' },
  reserved_domains: { operator: 'rw', viewer: 'r' },
  tls_certificates: { operator: 'rw', viewer: 'r' },
  traffic: { operator: 'rw', viewer: 'r' },
  tunnel_sessions: { operator: 'rw', viewer: 'r' },
  tunnels: { operator: 'rw', viewer: 'r' },
  users: { operator: '-', viewer: '-' },
  vaults: { operator: 'rw', viewer: 'r' },
};

/** Routes only some servers register: metrics off the API, the built dashboard, OIDC sign-in. */
const OPTIONAL_ROUTES = new Set([
  'GET /metrics',
  'GET /dashboard/*',
  // With --dashboard-oidc-issuer (test/dashboard-oidc.test.ts).
  'GET /auth/oidc/start',
  'GET /auth/oidc/callback',
]);

/** A concrete path for a route: ids that name nothing (the refusal must come first anyway). */
function concrete(route: string): string {
  return route
    .replace(/:id/g, 'zz_missing')
    .replace(/:host/g, 'nobody.test')
    .replace(/:token/g, 'nothing')
    .replace('*', 'index.js');
}

const DENIED = 'ERR_BURROW_PERMISSION_DENIED';

describe('route permissions', () => {
  let api: TestApi;
  const keys: Record<string, string> = {};
  beforeAll(async () => {
    api = await createTestApi('sqlite');
    const operator = await api.repos.users.create('olga', 'operator password', 'operator');
    const viewer = await api.repos.users.create('victor', 'viewer password', 'viewer');
    keys.operator = (await api.repos.apiKeys.create({ owner_id: operator.id })).token!;
    keys.viewer = (await api.repos.apiKeys.create({ owner_id: viewer.id })).token!;
    // An admin-owned key narrowed to viewer acts as a viewer.
    keys.narrowed = (await api.repos.apiKeys.create({ role: 'viewer' })).token!;
    keys.scoped = (await api.repos.apiKeys.create({ scopes: ['endpoints:write'] })).token!;
  });
  afterAll(async () => api.close());

  it('lists every registered route, and only those (a new route must be added to the table)', () => {
    const registered = registeredRoutes(api.app);
    expect(registered.length).toBeGreaterThan(100);
    const missing = registered.filter((r) => ROUTE_PERMISSIONS[r] === undefined);
    expect(missing).toEqual([]);
    const stale = Object.keys(ROUTE_PERMISSIONS).filter(
      (r) => !registered.includes(r) && !OPTIONAL_ROUTES.has(r),
    );
    expect(stale).toEqual([]);
  });

  it('covers every operation of the OpenAPI document', async () => {
    const doc = await api.call('GET', '/openapi.json');
    const operations = Object.entries(doc.body.paths as Record<string, object>).flatMap(
      ([path, ops]) =>
        Object.keys(ops)
          .filter((m) => m !== 'head')
          .map((m) => `${m.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`),
    );
    expect(operations.length).toBeGreaterThan(100);
    expect(operations.filter((op) => ROUTE_PERMISSIONS[op] === undefined)).toEqual([]);
  });

  it('every route refuses exactly what each role and scope may not do', async () => {
    const wrong: string[] = [];
    for (const [route, rule] of Object.entries(ROUTE_PERMISSIONS)) {
      if (rule === 'public' || OPTIONAL_ROUTES.has(route)) continue;
      const [method, path] = route.split(' ') as [string, string];
      const [resource, access] = rule === 'signed_in' ? [undefined, 'read'] : rule.split(':');
      const expected = resource ? EXPECTED[resource as Resource] : { operator: 'rw', viewer: 'r' };
      const allowed = (grant: string) => grant.includes(access === 'read' ? 'r' : 'w');
      const cases: Array<[string, string | undefined, boolean]> = [
        ['admin', api.key, true],
        ['operator', keys.operator, allowed(expected.operator)],
        ['viewer', keys.viewer, allowed(expected.viewer)],
        ['admin key narrowed to viewer', keys.narrowed, allowed(expected.viewer)],
        [
          'key scoped to endpoints:write',
          keys.scoped,
          rule === 'signed_in' || (resource === 'endpoints' && access !== undefined),
        ],
      ];
      for (const [who, key, mayPass] of cases) {
        const res = await api.call(method, concrete(path), method === 'GET' ? undefined : {}, {
          authorization: `Bearer ${key}`,
        });
        const refused = res.status === 403 && res.body?.error_code === DENIED;
        if (refused === mayPass) {
          wrong.push(`${who}: ${route} answered ${res.status} ${res.body?.error_code ?? ''}`);
        }
        if (refused) expect(res.body.msg).toContain(rule);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('names every resource of roles.ts in the expectations', () => {
    expect(Object.keys(EXPECTED).sort()).toEqual([...RESOURCES].sort());
  });
});
