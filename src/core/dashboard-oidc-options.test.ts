import { describe, expect, it } from 'vitest';
import { ConfigError, loadServerConfig } from './config.js';

const BASE = {
  'dashboard-oidc-issuer': 'https://id.example.com',
  'dashboard-oidc-client-id': 'burrow',
  'dashboard-oidc-client-secret': 'a secret',
};

describe('--dashboard-oidc-*', () => {
  it('is off without an issuer', () => {
    expect(loadServerConfig({}, {}).dashboardOidc).toBeUndefined();
  });

  it('reads the allow rules and role groups, lower-casing emails and domains', () => {
    const c = loadServerConfig(
      {
        ...BASE,
        'dashboard-oidc-allowed-emails': 'Ada@Example.com, bob@example.org',
        'dashboard-oidc-allowed-domains': '@Team.Example',
        'dashboard-oidc-admin-groups': 'burrow-admins',
        'dashboard-oidc-default-role': 'operator',
      },
      {},
    ).dashboardOidc;
    expect(c).toMatchObject({
      allowedEmails: ['ada@example.com', 'bob@example.org'],
      allowedDomains: ['team.example'],
      adminGroups: ['burrow-admins'],
      groupsClaim: 'groups',
      defaultRole: 'operator',
    });
    expect(c?.issuer.href).toBe('https://id.example.com/');
  });

  it('refuses to start open to anyone with an account at the provider, or half set up', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [BASE, 'dashboard-oidc-allowed-domains'],
      [{ ...BASE, 'dashboard-oidc-client-secret': '' }, 'dashboard-oidc-client-secret'],
      [{ ...BASE, 'dashboard-oidc-issuer': 'http://id.example.com' }, 'dashboard-oidc-issuer'],
      [
        { ...BASE, 'dashboard-oidc-allowed-groups': 'g', 'dashboard-oidc-default-role': 'root' },
        'dashboard-oidc-default-role',
      ],
    ];
    for (const [flags, option] of cases) {
      expect(() => loadServerConfig(flags, {})).toThrow(ConfigError);
      expect(() => loadServerConfig(flags, {})).toThrow(option);
    }
  });
});
