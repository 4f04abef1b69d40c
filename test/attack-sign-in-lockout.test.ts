import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../src/store/index.js';
import { createTestRepositories } from './support/api.js';
import { startBurrowServer, type BurrowServer } from './support/server-process.js';
import { createTestDatabase, type TestDatabase } from './support/stores.js';

/**
 * Issue 27 item 8, as the attack, on a real `burrow server`: an attacker guesses `admin`'s
 * password twelve times from two addresses (127.0.0.2 and 127.0.0.3, real sockets bound to
 * them); the administrator, from another address, still signs in with the right password, while
 * the attacker's addresses are throttled.
 */

const PASSWORD = 'the administrator knows this one';

/** POST /auth/login from `localAddress`; the status and the body. */
function signIn(
  server: BurrowServer,
  localAddress: string,
  password: string,
): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ name: 'admin', password });
  return new Promise((resolve, reject) => {
    const req = request(
      `${server.url}/auth/login`,
      {
        method: 'POST',
        localAddress,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

describe('sign-in limits cannot lock a user out', () => {
  let db: TestDatabase;
  let server: BurrowServer;

  beforeAll(async () => {
    db = await createTestDatabase('sqlite');
    const store = await openStore({ database: db.database, dataDir: db.dataDir });
    await createTestRepositories(store).users.create('admin', PASSWORD);
    await store.close();
    server = await startBurrowServer(db);
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await db?.drop();
  });

  it('twelve wrong guesses from two other addresses, then the right password from a third gets in', async () => {
    const attacker: number[] = [];
    for (let i = 0; i < 12; i++) {
      attacker.push(
        (await signIn(server, i % 2 === 0 ? '127.0.0.2' : '127.0.0.3', 'guess')).status,
      );
    }
    // Each attacking address is throttled after five failures for the name.
    expect(attacker.filter((s) => s === 401)).toHaveLength(10);
    expect(attacker.filter((s) => s === 429)).toHaveLength(2);
    const throttled = await signIn(server, '127.0.0.2', PASSWORD);
    expect(throttled.status).toBe(429);
    expect(JSON.parse(throttled.body).msg).toMatch(
      /^Too many sign-in attempts\. Try again in \d+ seconds\.$/,
    );

    const admin = await signIn(server, '127.0.0.4', PASSWORD);
    expect(admin.status).toBe(200);
    expect(JSON.parse(admin.body).user.name).toBe('admin');
  });
});
