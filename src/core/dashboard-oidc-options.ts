/**
 * `--dashboard-oidc-*`: dashboard sign-in with an OpenID Connect provider (src/api/dashboard-oidc.ts),
 * beside passwords. server-options.ts lists these options; config.ts reads them here.
 */
import { secureOrLoopbackUrl } from './hostname.js';
import { isRole, ROLES, type Role } from './roles.js';

/** One option of this file, as server-options.ts lists it (its key is added there). */
export interface DashboardOidcOptionSpec {
  name: string;
  description: string;
  default: string;
  repeatable?: boolean;
}

export const DASHBOARD_OIDC_OPTIONS: readonly DashboardOidcOptionSpec[] = [
  {
    name: 'dashboard-oidc-issuer',
    description:
      'the OpenID provider people sign in to the dashboard with (https; http only on loopback); its redirect URI is <public API URL>/auth/oidc/callback',
    default: '',
  },
  { name: 'dashboard-oidc-client-id', description: 'the client id at that provider', default: '' },
  {
    name: 'dashboard-oidc-client-secret',
    description:
      'the client secret (prefer the environment variable or the config file to the flag)',
    default: '',
  },
  {
    name: 'dashboard-oidc-allowed-emails',
    description: 'verified email addresses that may sign in (comma-separated)',
    default: '',
    repeatable: true,
  },
  {
    name: 'dashboard-oidc-allowed-domains',
    description: 'email domains whose verified addresses may sign in, e.g. example.com',
    default: '',
    repeatable: true,
  },
  {
    name: 'dashboard-oidc-allowed-groups',
    description: 'groups (in the groups claim) whose members may sign in',
    default: '',
    repeatable: true,
  },
  {
    name: 'dashboard-oidc-groups-claim',
    description: 'the ID token claim that lists the groups',
    default: 'groups',
  },
  {
    name: 'dashboard-oidc-admin-groups',
    description: 'members of these groups are admins (set at each sign-in)',
    default: '',
    repeatable: true,
  },
  {
    name: 'dashboard-oidc-operator-groups',
    description: 'members of these groups are operators (set at each sign-in)',
    default: '',
    repeatable: true,
  },
  {
    name: 'dashboard-oidc-default-role',
    description: `the role of a person no role group names: ${ROLES.join(', ')}`,
    default: 'viewer',
  },
];

/** Dashboard sign-in with OpenID Connect, when configured. */
export interface DashboardOidcConfig {
  issuer: URL;
  clientId: string;
  clientSecret: string;
  /** Lower-case. */
  allowedEmails: string[];
  /** Lower-case, without '@'. */
  allowedDomains: string[];
  allowedGroups: string[];
  groupsClaim: string;
  adminGroups: string[];
  operatorGroups: string[];
  defaultRole: Role;
}

function list(value: string, lower = false): string[] {
  return value
    .split(',')
    .map((v) => (lower ? v.trim().toLowerCase() : v.trim()))
    .filter((v) => v !== '');
}

/**
 * The `--dashboard-oidc-*` options, or undefined when no issuer is given. An issuer without a
 * client, or without any allow rule (anyone with an account at the provider would get in), is
 * refused at start.
 * @example parseDashboardOidc((name, def) => def, fail) // undefined
 */
export function parseDashboardOidc(
  raw: (name: string, def: string) => string,
  fail: (name: string, rule: string) => Error,
): DashboardOidcConfig | undefined {
  const issuerText = raw('dashboard-oidc-issuer', '').trim();
  if (issuerText === '') return undefined;
  const issuer = secureOrLoopbackUrl(issuerText, false);
  if (!issuer) {
    throw fail(
      'dashboard-oidc-issuer',
      'must be an https URL without query (http only on loopback)',
    );
  }
  const clientId = raw('dashboard-oidc-client-id', '').trim();
  const clientSecret = raw('dashboard-oidc-client-secret', '').trim();
  if (clientId === '' || clientSecret === '') {
    throw fail(
      clientId === '' ? 'dashboard-oidc-client-id' : 'dashboard-oidc-client-secret',
      'is needed with --dashboard-oidc-issuer',
    );
  }
  const defaultRole = raw('dashboard-oidc-default-role', 'viewer').trim();
  if (!isRole(defaultRole)) {
    throw fail('dashboard-oidc-default-role', `must be one of ${ROLES.join(', ')}`);
  }
  const config: DashboardOidcConfig = {
    issuer,
    clientId,
    clientSecret,
    allowedEmails: list(raw('dashboard-oidc-allowed-emails', ''), true),
    allowedDomains: list(raw('dashboard-oidc-allowed-domains', ''), true).map((d) =>
      d.replace(/^@/, ''),
    ),
    allowedGroups: list(raw('dashboard-oidc-allowed-groups', '')),
    groupsClaim: raw('dashboard-oidc-groups-claim', 'groups').trim() || 'groups',
    adminGroups: list(raw('dashboard-oidc-admin-groups', '')),
    operatorGroups: list(raw('dashboard-oidc-operator-groups', '')),
    defaultRole,
  };
  if (
    config.allowedEmails.length + config.allowedDomains.length + config.allowedGroups.length ===
    0
  ) {
    throw fail(
      'dashboard-oidc-allowed-domains',
      'give --dashboard-oidc-allowed-domains, -allowed-emails or -allowed-groups: without one, anyone with an account at the provider could sign in',
    );
  }
  return config;
}
