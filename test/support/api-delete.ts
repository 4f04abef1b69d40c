import { expect } from 'vitest';
import type { TestApi } from './api.js';

/**
 * Delete the resource at `path` through the API and check what every resource promises: 204 with
 * no body, then 404 `Resource not found` on GET, PATCH and DELETE.
 * @example await expectDeletedForGood(api, `/ip_policies/${created.id}`);
 */
export async function expectDeletedForGood(api: TestApi, path: string): Promise<void> {
  const del = await api.call('DELETE', path);
  expect(del.status).toBe(204);
  expect(del.body).toBeUndefined();
  for (const [method, body] of [['GET'], ['PATCH', {}], ['DELETE']] as const) {
    const res = await api.call(method, path, body);
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ status_code: 404, msg: 'Resource not found' });
  }
}
