import { ID_PREFIX, newId } from '../../src/core/ids.js';
import type { Store } from '../../src/store/index.js';
import { nowRfc3339 } from '../../src/store/paging.js';
import { TEST_STORE_SETTINGS } from './api.js';

/**
 * Rows that edges reference, inserted straight into their tables so edge tests do not depend on
 * the other resources' repositories or routes.
 * @example const fx = edgeFixtures(api.store); const addr = await fx.reservedAddr();
 */
export function edgeFixtures(store: Store) {
  const db = store.db;
  let nextPort = TEST_STORE_SETTINGS.tcpPorts.first;
  const common = () => ({ description: '', metadata: '', created_at: nowRfc3339() });
  return {
    /** A reserved TCP address on the test TCP host (on `port`, or the next test port). */
    async reservedAddr(port = nextPort++): Promise<{ id: string; addr: string }> {
      const row = {
        id: newId(ID_PREFIX.reservedAddr),
        ...common(),
        addr: `${TEST_STORE_SETTINGS.tcpHost}:${port}`,
        port,
        region: 'us',
      };
      await db.insertInto('reserved_addrs').values(row).execute();
      return { id: row.id, addr: row.addr };
    },
    /** A reserved domain (wildcards allowed); returns its id and domain. */
    async reservedDomain(domain: string): Promise<{ id: string; domain: string }> {
      const id = newId(ID_PREFIX.reservedDomain);
      await db
        .insertInto('reserved_domains')
        .values({
          id,
          ...common(),
          domain,
          region: '',
          cname_target: null,
          acme_challenge_cname_target: null,
          certificate_management_policy: null,
          certificate_management_status: null,
        })
        .execute();
      return { id, domain };
    },
    async backend(): Promise<string> {
      const id = newId(ID_PREFIX.tunnelGroupBackend);
      await db
        .insertInto('backends')
        .values({ id, ...common(), type: 'tunnel_group', config: '{"labels":{"app":"x"}}' })
        .execute();
      return id;
    },
    async ipPolicy(): Promise<string> {
      const id = newId(ID_PREFIX.ipPolicy);
      await db
        .insertInto('ip_policies')
        .values({ id, ...common() })
        .execute();
      return id;
    },
    async certificateAuthority(): Promise<string> {
      const id = newId(ID_PREFIX.certificateAuthority);
      await db
        .insertInto('certificate_authorities')
        .values({
          id,
          ...common(),
          ca_pem: '-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n',
          subject_common_name: 'test ca',
          not_before: '2025-01-01T00:00:00Z',
          not_after: '2035-01-01T00:00:00Z',
          key_usages: '[]',
          extended_key_usages: '[]',
        })
        .execute();
      return id;
    },
    /** Ids `fromId` references in the refs table, sorted. */
    async refsOf(fromId: string): Promise<string[]> {
      const rows = await db
        .selectFrom('refs')
        .select('to_id')
        .where('from_id', '=', fromId)
        .orderBy('to_id')
        .execute();
      return rows.map((r) => r.to_id);
    },
    /** Hostport rows of `edgeId`, sorted by hostport. */
    async hostportRows(edgeId: string): Promise<Array<{ hostport: string; target_id: string }>> {
      return db
        .selectFrom('edge_hostports')
        .select(['hostport', 'target_id'])
        .where('edge_id', '=', edgeId)
        .orderBy('hostport')
        .execute();
    },
  };
}

export type EdgeFixtures = ReturnType<typeof edgeFixtures>;
