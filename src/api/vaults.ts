import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { aclReadsVault, parseAcl } from '../core/acl.js';
import type { Repositories } from '../store/index.js';
import { SECRET_VALUE_MAX_BYTES, type Secret, type Vault } from '../store/vaults.js';
import type { ApiContext } from './context.js';
import { found, registerCrud } from './crud.js';
import { listEnvelope, pageRequest } from './paging.js';
import { Body, Description, IdParams, ListOf, ListQuery, Metadata, Name, Ref } from './schemas.js';

export const VaultSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  name: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
});

/** A secret as the API shows it: never with its value. */
export const SecretSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  name: Type.String(),
  description: Type.String(),
  metadata: Type.String(),
  vault: Ref,
  created_at: Type.String(),
  updated_at: Type.String(),
});

/** A credential whose ACL lets its agents' policies read a vault. */
const VaultReaderSchema = Type.Object({
  id: Type.String(),
  uri: Type.String(),
  description: Type.String(),
  owner_id: Type.String(),
  /** The ACL rule that grants it: `secrets:read:<name>` or `secrets:read:*`. */
  rule: Type.String(),
});

/** Credentials are read this many at a time when looking for a vault's readers. */
const READER_SCAN_PAGE = 100;

/**
 * The credentials whose ACL grants vault `name` (`secrets:read:<name>` or `secrets:read:*`),
 * newest first, with the rule that does: a scan of every credential, as the grant lives on them.
 */
async function readersOf(repos: Repositories, name: string) {
  const readers: Array<{ id: string; description: string; owner_id: string; rule: string }> = [];
  let beforeId: string | undefined;
  do {
    const page = await repos.credentials.list({ beforeId, limit: READER_SCAN_PAGE });
    for (const c of page.items) {
      const acl = parseAcl(c.acl);
      if ('error' in acl || !aclReadsVault(acl.rules, name)) continue;
      const rule = c.acl.includes(`secrets:read:${name}`)
        ? `secrets:read:${name}`
        : 'secrets:read:*';
      readers.push({ id: c.id, description: c.description, owner_id: c.owner_id, rule });
    }
    beforeId = page.nextBeforeId;
  } while (beforeId !== undefined);
  return readers;
}

const VaultName = Name(
  "the vault's name, unique; policies read its secrets with secrets.get('<vault name>', '<secret name>')",
);
const SecretName = Name(
  "the secret's name, unique in its vault; policies read it with secrets.get('<vault name>', '<secret name>')",
);
const SecretValue = Type.String({
  maxBytes: SECRET_VALUE_MAX_BYTES,
  description: `the secret value: write-only (never returned, logged or audited), stored encrypted; at most ${SECRET_VALUE_MAX_BYTES} bytes of UTF-8`,
});

/**
 * `/vaults` and `/secrets`: values traffic policies read with `secrets.get('vault', 'name')`, so
 * a client secret is kept once rather than pasted into every policy. Values are write-only.
 */
export async function vaultRoutes(
  app: FastifyInstance,
  { repos, uris }: ApiContext,
): Promise<void> {
  const viewVault = (v: Vault) => ({ ...v, uri: uris.of(v.id) });
  const viewSecret = (s: Secret) => ({
    id: s.id,
    uri: uris.of(s.id),
    name: s.name,
    description: s.description,
    metadata: s.metadata,
    vault: uris.ref(s.vault_id),
    created_at: s.created_at,
    updated_at: s.updated_at,
  });
  registerCrud(
    app,
    {
      path: 'vaults',
      listKey: 'vaults',
      name: 'vault',
      tag: 'Secrets',
      item: VaultSchema,
      createBody: Body({
        name: VaultName,
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      updateBody: Body({
        name: Type.Optional(VaultName),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      repo: repos.vaults,
      view: viewVault,
    },
    uris.collection('vaults'),
  );
  registerCrud(
    app,
    {
      path: 'secrets',
      listKey: 'secrets',
      name: 'secret',
      tag: 'Secrets',
      item: SecretSchema,
      createBody: Body({
        vault_id: Type.String({ description: 'the vault (vault_…) the secret belongs to' }),
        name: SecretName,
        value: SecretValue,
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
      }),
      updateBody: Body({
        name: Type.Optional(SecretName),
        value: Type.Optional(SecretValue),
        description: Type.Optional(Description),
        metadata: Type.Optional(Metadata),
        // Listed only so that sending it is answered with how to move a secret.
        vault_id: Type.Optional(
          Type.Unknown({ description: 'cannot be changed: create the secret in the other vault' }),
        ),
      }),
      repo: repos.secrets,
      view: viewSecret,
    },
    uris.collection('secrets'),
  );
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/vaults/:id/readers',
    {
      schema: {
        tags: ['Secrets'],
        summary: "The authtokens whose agents' policies may read the vault",
        description:
          "Credentials whose acl has secrets:read:<this vault's name> or secrets:read:*. Policies saved through the API (cloud endpoints, edges) read every vault; they are not listed.",
        params: IdParams,
        response: {
          200: Type.Object({ readers: Type.Array(VaultReaderSchema), uri: Type.String() }),
        },
      },
    },
    async (request) => {
      const vault = found(await repos.vaults.get(request.params.id));
      const readers = await readersOf(repos, vault.name);
      return {
        readers: readers.map((r) => ({ ...r, uri: uris.of(r.id) })),
        uri: `${uris.of(vault.id)}/readers`,
      };
    },
  );
  app.withTypeProvider<TypeBoxTypeProvider>().get(
    '/vaults/:id/secrets',
    {
      schema: {
        tags: ['Secrets'],
        summary: 'List the secrets of a vault',
        params: IdParams,
        querystring: ListQuery,
        response: { 200: ListOf('secrets', SecretSchema) },
      },
    },
    async (request) => {
      const vault = found(await repos.vaults.get(request.params.id));
      const req = pageRequest(request.query);
      const page = await repos.secrets.listOfVault(vault.id, req);
      return listEnvelope(
        'secrets',
        { items: page.items.map(viewSecret), nextBeforeId: page.nextBeforeId },
        `${uris.of(vault.id)}/secrets`,
        req,
      );
    },
  );
}
