import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../core/errors.js';
import { TEST_STORE_SETTINGS } from '../../test/support/api.js';
import {
  createTestDatabase,
  DATABASE_KINDS,
  type TestDatabase,
} from '../../test/support/stores.js';
import { checkPolicyWellFormed } from './edge-modules.js';
import { createRepositories, openStore, type Store } from './index.js';

const DENY_ALL = 'on_tcp_connect:\n  - actions: [{type: deny}]\n';

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ValidationError) return `${err.code} ${err.field}`;
    throw err;
  }
  return undefined;
}

describe('checkPolicyWellFormed (the store without the policy engine)', () => {
  it('accepts JSON and YAML mappings, whatever their rules say', () => {
    expect(codeOf(() => checkPolicyWellFormed('{}', 'tcp', 'value'))).toBeUndefined();
    expect(codeOf(() => checkPolicyWellFormed(DENY_ALL, 'tls', 'value'))).toBeUndefined();
    expect(
      codeOf(() => checkPolicyWellFormed('{"on_tcp_connect": [{"bogus": 1}]}', 'tcp', 'v')),
    ).toBeUndefined();
  });

  it('refuses text that is not a JSON or YAML mapping with ERR_NGROK_2236 naming the field', () => {
    for (const text of ['', '{not json', '[1, 2]', '"text"', 'a: 1\na: 2\n']) {
      expect(codeOf(() => checkPolicyWellFormed(text, 'tcp', 'traffic_policy.value'))).toBe(
        'ERR_NGROK_2236 traffic_policy.value',
      );
    }
  });
});

describe.each(DATABASE_KINDS)('EdgeRepository traffic policy hook (%s)', (kind) => {
  let db: TestDatabase;
  let store: Store;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
    store = await openStore({ database: db.database, dataDir: db.dataDir });
  });
  afterAll(async () => {
    await store.close();
    await db.drop();
  });

  it('hands every traffic policy to the injected validator with the protocol and field', async () => {
    const calls: string[] = [];
    const repos = createRepositories(store, TEST_STORE_SETTINGS, {
      validateTrafficPolicy: (text, protocol, field) => {
        calls.push(`${protocol} ${field} ${text}`);
        if (text.includes('refuse')) throw new ValidationError('ERR_NGROK_2200', field, 'no');
      },
    });
    const edge = await repos.edges.create('tls', { traffic_policy: { value: '{}' } });
    await repos.edges.setModule('tls', edge.id, 'traffic_policy', { value: DENY_ALL });
    await expect(
      repos.edges.create('tcp', { traffic_policy: { value: '{"refuse": true}' } }),
    ).rejects.toMatchObject({ code: 'ERR_NGROK_2200', field: 'traffic_policy.value' });
    expect(calls).toEqual([
      'tls traffic_policy.value {}',
      `tls value ${DENY_ALL}`,
      'tcp traffic_policy.value {"refuse": true}',
    ]);
  });

  it('falls back to the well-formedness check when built without a validator', async () => {
    const repos = createRepositories(store, TEST_STORE_SETTINGS);
    const edge = await repos.edges.create('tcp', { traffic_policy: { value: DENY_ALL } });
    expect(edge.traffic_policy).toEqual({ enabled: true, value: DENY_ALL });
    await expect(
      repos.edges.create('tcp', { traffic_policy: { value: '[1]' } }),
    ).rejects.toMatchObject({ code: 'ERR_NGROK_2236', field: 'traffic_policy.value' });
  });
});
