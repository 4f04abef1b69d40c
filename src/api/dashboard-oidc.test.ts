import { describe, expect, it } from 'vitest';
import type { DashboardOidcConfig } from '../core/dashboard-oidc-options.js';
import { admitted, roleOfGroups } from './dashboard-oidc.js';

const CONFIG: DashboardOidcConfig = {
  issuer: new URL('https://id.example.com'),
  clientId: 'burrow',
  clientSecret: 'secret',
  allowedEmails: ['contractor@partner.example'],
  allowedDomains: ['example.com'],
  allowedGroups: ['burrow-users'],
  groupsClaim: 'groups',
  adminGroups: ['platform-admins'],
  operatorGroups: ['oncall'],
  defaultRole: 'viewer',
};

describe('dashboard sign-in rules', () => {
  it('admits a listed email, an email of a listed domain or a member of a listed group', () => {
    expect(admitted(CONFIG, 'Contractor@Partner.example', [])).toBe(true);
    expect(admitted(CONFIG, 'ada@example.com', [])).toBe(true);
    expect(admitted(CONFIG, '', ['burrow-users'])).toBe(true);
  });

  it('refuses look-alike domains, other addresses and no identity at all', () => {
    expect(admitted(CONFIG, 'ada@evil-example.com', [])).toBe(false);
    expect(admitted(CONFIG, 'ada@example.com.evil.test', [])).toBe(false);
    expect(admitted(CONFIG, 'example.com@evil.test', [])).toBe(false);
    expect(admitted(CONFIG, 'someone@partner.example', ['other'])).toBe(false);
    expect(admitted(CONFIG, '', [])).toBe(false);
  });

  it('gives the role of the widest role group, or none', () => {
    expect(roleOfGroups(CONFIG, ['oncall', 'platform-admins'])).toBe('admin');
    expect(roleOfGroups(CONFIG, ['oncall'])).toBe('operator');
    expect(roleOfGroups(CONFIG, ['burrow-users'])).toBeUndefined();
  });
});
