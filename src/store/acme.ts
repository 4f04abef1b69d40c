import type { Kysely } from 'kysely';
import { ID_PREFIX, newId } from '../core/ids.js';
import { isUniqueViolation } from './database.js';
import type { Database } from './schema.js';

/** The two challenge types Burrow answers. */
export type ChallengeKind = 'http-01' | 'dns-01';

/**
 * ACME state every process on the store shares: challenge answers (the CA may reach any process
 * that serves the name) and ordering leases (one process orders a subject at a time; a lease whose
 * holder died lapses and is taken over).
 * @example await acme.putChallenge('http-01', token, keyAuthorization, 10 * 60_000);
 */
export class AcmeStateRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Publish a challenge answer for `ttlMs`; returns its id for removeChallenge. */
  async putChallenge(kind: ChallengeKind, name: string, value: string, ttlMs: number) {
    const id = newId(ID_PREFIX.acmeChallenge);
    await this.db
      .insertInto('acme_challenges')
      .values({ id, kind, name, value, expires_ms: this.now() + ttlMs })
      .execute();
    return id;
  }

  async removeChallenge(id: string): Promise<void> {
    await this.db.deleteFrom('acme_challenges').where('id', '=', id).execute();
  }

  /**
   * The live answers for `name` (a token for http-01, a lowercase FQDN for dns-01).
   * @example await acme.challengeValues('dns-01', 'kjrplmqa.acme-challenge.burrow.example.com')
   */
  async challengeValues(kind: ChallengeKind, name: string): Promise<string[]> {
    const rows = await this.db
      .selectFrom('acme_challenges')
      .select('value')
      .where('kind', '=', kind)
      .where('name', '=', name)
      .where('expires_ms', '>', this.now())
      .orderBy('id')
      .execute();
    return rows.map((r) => r.value);
  }

  /** Forget answers whose time is up (a crashed order leaves its answers behind). */
  async purgeExpiredChallenges(): Promise<void> {
    await this.db.deleteFrom('acme_challenges').where('expires_ms', '<=', this.now()).execute();
  }

  /**
   * Take or extend the lease on `subject` for `ttlMs`; false while another holder's lease runs.
   * @example if (await acme.lease('rd_…', nodeId, 5 * 60_000)) await order();
   */
  async lease(subject: string, holder: string, ttlMs: number): Promise<boolean> {
    const now = this.now();
    const expires = now + ttlMs;
    try {
      await this.db
        .insertInto('acme_leases')
        .values({ subject, holder, expires_ms: expires })
        .execute();
      return true;
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
    }
    const res = await this.db
      .updateTable('acme_leases')
      .set({ holder, expires_ms: expires })
      .where('subject', '=', subject)
      .where((eb) => eb.or([eb('holder', '=', holder), eb('expires_ms', '<=', now)]))
      .executeTakeFirst();
    return res.numUpdatedRows > 0n;
  }

  /** Give the lease back early (the order finished). */
  async release(subject: string, holder: string): Promise<void> {
    await this.db
      .deleteFrom('acme_leases')
      .where('subject', '=', subject)
      .where('holder', '=', holder)
      .execute();
  }
}
