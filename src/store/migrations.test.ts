import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type Migration,
} from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Dialect } from './database.js';
import { initialMigration } from './migrations/0001-initial.js';
import { certificatesMigration } from './migrations/0002-certificates.js';
import { usersMigration } from './migrations/0003-users.js';
import { endpointsMigration } from './migrations/0004-endpoints.js';
import { auditMigration } from './migrations/0005-audit.js';
import { clusterMigration } from './migrations/0006-cluster.js';
import { vaultsMigration } from './migrations/0007-vaults.js';
import { rolesMigration } from './migrations/0008-roles.js';
import { eventDestinationsMigration } from './migrations/0010-event-destinations.js';

/** The migrations in the order src/store/database.ts applies them. */
const MIGRATIONS: [string, (dialect: Dialect) => Migration][] = [
  ['0001-initial', initialMigration],
  ['0002-certificates', certificatesMigration],
  ['0003-users', usersMigration],
  ['0004-endpoints', endpointsMigration],
  ['0005-audit', auditMigration],
  ['0006-cluster', clusterMigration],
  ['0007-vaults', vaultsMigration],
  ['0008-roles', rolesMigration],
  ['0010-event-destinations', eventDestinationsMigration],
];

/**
 * The DDL every migration sends to PostgreSQL, to the byte. Migrations are history: databases
 * created by earlier versions already have this schema, so a fresh one must get the same. Do not
 * edit these lines; add a migration instead.
 */
const POSTGRES_DDL: Record<string, string[]> = {
  '0001-initial': [
    'create table "settings" ("key" text primary key, "value" text not null)',
    'create table "api_keys" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "owner_id" text collate "C" not null, "token_hash" text not null)',
    'create table "bot_users" ("id" text collate "C" primary key, "name" text not null unique, "active" integer not null, "created_at" text not null)',
    'create table "credentials" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "owner_id" text collate "C" not null, "acl" text not null, "token_hash" text not null)',
    'create index "credentials_owner" on "credentials" ("owner_id")',
    'create table "reserved_domains" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "domain" text not null unique, "region" text not null, "cname_target" text, "acme_challenge_cname_target" text, "certificate_management_policy" text, "certificate_management_status" text)',
    'create table "reserved_addrs" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "addr" text not null unique, "port" integer not null unique, "region" text not null)',
    'create table "ip_policies" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null)',
    'create table "ip_policy_rules" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "ip_policy_id" text collate "C" not null references "ip_policies" ("id") on delete cascade, "cidr" text not null, "action" text not null, constraint "ip_policy_rules_cidr" unique ("ip_policy_id", "cidr"))',
    'create table "backends" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "type" text not null, "config" text not null)',
    'create index "backends_type" on "backends" ("type", "id")',
    'create table "certificate_authorities" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "ca_pem" text not null, "subject_common_name" text not null, "not_before" text not null, "not_after" text not null, "key_usages" text not null, "extended_key_usages" text not null)',
    'create table "edges" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "type" text not null, "hostports" text, "backend" text, "ip_restriction" text, "traffic_policy" text, "mutual_tls" text, "tls_termination" text)',
    'create index "edges_type" on "edges" ("type", "id")',
    'create table "edge_hostports" ("hostport" text primary key, "edge_id" text collate "C" not null references "edges" ("id") on delete cascade, "target_id" text collate "C" not null)',
    'create index "edge_hostports_edge" on "edge_hostports" ("edge_id")',
    'create index "edge_hostports_target" on "edge_hostports" ("target_id")',
    'create table "refs" ("from_id" text collate "C" not null, "to_id" text collate "C" not null, constraint "refs_pk" primary key ("from_id", "to_id"))',
    'create index "refs_to" on "refs" ("to_id")',
  ],
  '0002-certificates': [
    'create table "tls_certificates" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "certificate_pem" text not null, "private_key_pem" text not null, "private_key_type" text not null, "subject_common_name" text not null, "dns_names" text not null, "ips" text not null, "issuer_common_name" text not null, "serial_number" text not null, "not_before" text not null, "not_after" text not null, "managed_by" text)',
    'create table "acme_challenges" ("id" text collate "C" primary key, "kind" text not null, "name" text not null, "value" text not null, "expires_ms" bigint not null)',
    'create index "acme_challenges_lookup" on "acme_challenges" ("kind", "name")',
    'create table "acme_leases" ("subject" text primary key, "holder" text not null, "expires_ms" bigint not null)',
    'alter table "reserved_domains" add column "certificate_id" text',
  ],
  '0003-users': [
    'create table "users" ("id" text collate "C" primary key, "name" text not null unique, "password_hash" text not null, "created_at" text not null)',
    'create table "user_sessions" ("token_hash" text primary key, "user_id" text collate "C" not null references "users" ("id") on delete cascade, "created_at" text not null, "expires_ms" bigint not null)',
    'create index "user_sessions_user" on "user_sessions" ("user_id")',
    'create table "user_setup_tokens" ("token_hash" text primary key, "expires_ms" bigint not null)',
  ],
  '0004-endpoints': [
    'create table "cloud_endpoints" ("id" text collate "C" primary key, "url" text not null unique, "traffic_policy" text not null, "bindings" text not null, "pooling_enabled" integer not null, "description" text not null, "metadata" text not null, "created_at" text not null, "updated_at" text not null)',
  ],
  '0005-audit': [
    'create table "audit_events" ("id" text collate "C" primary key, "created_at" text not null, "operation_id" text not null, "actor_type" text not null, "actor_id" text, "method" text not null, "path" text not null, "status_code" integer not null, "resource_id" text, "client_ip" text not null)',
  ],
  '0006-cluster': [
    'create table "nodes" ("id" text collate "C" primary key, "role" text not null, "link_address" text not null, "started_at" text not null, "heartbeat_at" timestamptz default now() not null)',
    'create table "online_sessions" ("id" text collate "C" primary key, "node_id" text collate "C" not null references "nodes" ("id") on delete cascade, "credential_id" text not null, "data" text not null)',
    'create index "online_sessions_node" on "online_sessions" ("node_id")',
    'create table "online_tunnels" ("id" text collate "C" primary key, "session_id" text collate "C" not null references "online_sessions" ("id") on delete cascade, "node_id" text collate "C" not null references "nodes" ("id") on delete cascade, "route_key" text, "pooling" integer not null, "data" text not null)',
    'create index "online_tunnels_route_key" on "online_tunnels" ("route_key")',
    'create index "online_tunnels_node" on "online_tunnels" ("node_id")',
    'create index "online_tunnels_session" on "online_tunnels" ("session_id")',
  ],
  '0007-vaults': [
    'create table "vaults" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "updated_at" text not null, "name" text not null unique)',
    'create table "secrets" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "updated_at" text not null, "vault_id" text collate "C" not null references "vaults" ("id") on delete cascade, "name" text not null, "value_encrypted" text not null, constraint "secrets_vault_name" unique ("vault_id", "name"))',
  ],
  '0008-roles': [
    'alter table "users" add column "role" text default \'admin\' not null',
    'alter table "users" add column "oidc_subject" text',
    'create unique index "users_oidc_subject" on "users" ("oidc_subject")',
    'alter table "api_keys" add column "role" text',
    'alter table "api_keys" add column "scopes" text',
    'alter table "audit_events" add column "actor_owner_id" text',
  ],
  '0010-event-destinations': [
    'create table "event_destinations" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "format" text not null, "kind" text not null, "target" text not null, "secret_encrypted" text)',
    'create table "event_subscriptions" ("id" text collate "C" primary key, "description" text default \'\' not null, "metadata" text default \'\' not null, "created_at" text not null, "sources" text not null, "destination_ids" text not null)',
  ],
};

/** SQLite gets the same DDL but for the id collation (its default is byte-wise) and the heartbeat. */
function sqliteDdl(statement: string): string {
  return statement
    .replaceAll(' collate "C"', '')
    .replace(
      '"heartbeat_at" timestamptz default now() not null',
      `"heartbeat_at" text default (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) not null`,
    );
}

/** Each migration's statements, compiled for `dialect` and sent nowhere. */
async function compiledDdl(dialect: Dialect): Promise<Record<string, string[]>> {
  let sent: string[] = [];
  const db = new Kysely<unknown>({
    dialect: {
      createAdapter: () => (dialect === 'postgres' ? new PostgresAdapter() : new SqliteAdapter()),
      createDriver: () => new DummyDriver(),
      createIntrospector: (k) =>
        dialect === 'postgres' ? new PostgresIntrospector(k) : new SqliteIntrospector(k),
      createQueryCompiler: () =>
        dialect === 'postgres' ? new PostgresQueryCompiler() : new SqliteQueryCompiler(),
    },
    log: (event) => {
      expect(event.query.parameters).toEqual([]);
      sent.push(event.query.sql);
    },
  });
  const ddl: Record<string, string[]> = {};
  for (const [id, migration] of MIGRATIONS) {
    sent = [];
    await migration(dialect).up(db);
    ddl[id] = sent;
  }
  await db.destroy();
  return ddl;
}

describe('migrations', () => {
  it('send PostgreSQL the DDL they always have', async () => {
    expect(await compiledDdl('postgres')).toEqual(POSTGRES_DDL);
  });

  it('send SQLite the DDL they always have', async () => {
    const expected = Object.fromEntries(
      Object.entries(POSTGRES_DDL).map(([id, statements]) => [id, statements.map(sqliteDdl)]),
    );
    expect(await compiledDdl('sqlite')).toEqual(expected);
  });

  it('are forward-only', async () => {
    for (const [, migration] of MIGRATIONS) {
      await expect(migration('sqlite').down?.({} as Kysely<unknown>)).rejects.toThrow(
        'Burrow migrations are forward-only; restore a backup to go back.',
      );
    }
  });
});
