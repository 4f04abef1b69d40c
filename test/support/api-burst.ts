/**
 * Plain HTTP calls for the fault tests: many at once, and a lost connection is a result
 * (status 0), not an exception, since losing it is what those tests provoke.
 */

/** What one call got: status 0 when the connection failed. */
export interface BurstReply {
  status: number;
  // Replies are JSON of many shapes; tests narrow them by assertion.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/**
 * `method path` on the API at `baseUrl` with `key`, never throwing.
 * @example const { status, body } = await apiCall(server.url, key, 'POST', '/ip_policies', {});
 */
export async function apiCall(
  baseUrl: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<BurstReply> {
  try {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        'service-version': '2',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: res.status, body: parsed };
  } catch (err) {
    return { status: 0, body: (err as Error).message };
  }
}

/**
 * Every item of a paged list, following `next_page_uri` to the end.
 * @example const policies = await listAll(server.url, key, '/ip_policies', 'ip_policies');
 */
export async function listAll<T>(
  baseUrl: string,
  key: string,
  path: string,
  listKey: string,
): Promise<T[]> {
  const items: T[] = [];
  let next: string | null = `${path}?limit=100`;
  while (next !== null) {
    const res = await apiCall(baseUrl, key, 'GET', next);
    if (res.status !== 200)
      throw new Error(`GET ${next}: ${res.status} ${JSON.stringify(res.body)}`);
    items.push(...(res.body[listKey] as T[]));
    const uri = res.body.next_page_uri as string | null;
    next = uri === null ? null : uri.slice(new URL(uri).origin.length);
  }
  return items;
}
