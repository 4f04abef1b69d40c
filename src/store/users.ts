import { randomBytes } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { CODES, ConflictError, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import { quote } from '../core/quote.js';
import { decoyHash, hashPassword, verifyPassword } from '../core/passwords.js';
import { isRole, type Role } from '../core/roles.js';
import { hashToken } from '../core/tokens.js';
import { isUniqueViolation } from './database.js';
import { countRows } from './resource-repository.js';
import type { Database } from './schema.js';

/** A dashboard user as the API shows it: never the password hash. */
export interface User {
  id: string;
  name: string;
  /** What the user may do (src/core/roles.ts); their API keys carry it or a narrower one. */
  role: Role;
  created_at: string;
}

/** The columns a User is read from. */
const USER_COLUMNS = ['users.id', 'users.name', 'users.role', 'users.created_at'] as const;

/** A stored role; anything else (a row edited by hand) counts as the narrowest. */
function userOf(row: { id: string; name: string; role: string; created_at: string }): User {
  return {
    id: row.id,
    name: row.name,
    role: isRole(row.role) ? row.role : 'viewer',
    created_at: row.created_at,
  };
}

/** A session found by its cookie token. */
export interface UserSession {
  user: User;
  expiresMs: number;
}

/** The longest user name. */
export const USER_NAME_MAX = 64;
/** Names: what people type to sign in; short, printable, no spaces at the ends. */
const NAME_RE = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,${USER_NAME_MAX - 1}}$`);
/** Long enough to resist guessing at the sign-in rate limit; bounded so scrypt's input stays small. */
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 1024;

function checkUserInput(name: string, password: string): void {
  if (!NAME_RE.test(name)) {
    throw new ValidationError(
      CODES.invalidValue,
      'name',
      `a user name is 1-${USER_NAME_MAX} letters, digits, ".", "_", "@" or "-", starting with a letter or digit`,
    );
  }
  checkPassword(password);
}

function checkPassword(password: string): void {
  if (password.length < PASSWORD_MIN || password.length > PASSWORD_MAX) {
    throw new ValidationError(
      CODES.invalidValue,
      'password',
      `a password has ${PASSWORD_MIN} to ${PASSWORD_MAX} characters`,
    );
  }
}

/** The password hash of a user who signs in with OpenID Connect: no password matches it. */
const NO_PASSWORD = '!oidc';

function token(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * Dashboard users, their sessions and the first-start setup token. Secrets (session tokens, the
 * setup token) are returned once and stored as SHA-256 hashes; passwords as scrypt hashes.
 * @example const user = await users.create('ada', 'a long password'); const s = await users.startSession(user.id, 3600_000);
 */
export class UserRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly now: () => number = Date.now,
  ) {}

  /** A new user with `role` (default: admin for the first user, viewer for every later one). */
  async create(name: string, password: string, role?: Role): Promise<User> {
    checkUserInput(name, password);
    const user: User = {
      id: newId(ID_PREFIX.user),
      name,
      role: role ?? ((await this.count()) === 0 ? 'admin' : 'viewer'),
      created_at: new Date(this.now()).toISOString(),
    };
    try {
      await this.db
        .insertInto('users')
        .values({ ...user, password_hash: await hashPassword(password) })
        .execute();
    } catch (err) {
      if (isUniqueViolation(err))
        throw new ConflictError(
          CODES.invalidValue,
          `a user named ${quote(name)} already exists: choose another name`,
        );
      throw err;
    }
    return user;
  }

  async count(): Promise<number> {
    return countRows(this.db, 'users');
  }

  async get(id: string): Promise<User | undefined> {
    const row = await this.db
      .selectFrom('users')
      .select(USER_COLUMNS)
      .where('id', '=', id)
      .executeTakeFirst();
    return row && userOf(row);
  }

  async getByName(name: string): Promise<User | undefined> {
    const row = await this.db
      .selectFrom('users')
      .select(USER_COLUMNS)
      .where('name', '=', name)
      .executeTakeFirst();
    return row && userOf(row);
  }

  async list(): Promise<User[]> {
    const rows = await this.db.selectFrom('users').select(USER_COLUMNS).orderBy('id').execute();
    return rows.map(userOf);
  }

  /**
   * Give user `id` a new role; it holds from their next request on (the role is read on every
   * one), for their sessions and their API keys. Undefined when there is no such user.
   */
  async setRole(id: string, role: Role): Promise<User | undefined> {
    await this.db.updateTable('users').set({ role }).where('id', '=', id).execute();
    return this.get(id);
  }

  /**
   * The user who signs in with OpenID Connect as `subject` (`<issuer> <sub>`): found by it, or
   * made on first sign-in named `name` with `role`. `setRole` (roles from the provider's groups)
   * also gives an existing user `role`. Such a user has no password (the stored hash matches none).
   * A name already taken by a password user is refused rather than linked: the provider's word
   * is not proof of owning that account.
   */
  async signInWithOidc(subject: string, name: string, role: Role, setRole: boolean): Promise<User> {
    const found = await this.db
      .selectFrom('users')
      .select(USER_COLUMNS)
      .where('oidc_subject', '=', subject)
      .executeTakeFirst();
    if (found) {
      if (setRole && found.role !== role) return (await this.setRole(found.id, role))!;
      return userOf(found);
    }
    const user: User = {
      id: newId(ID_PREFIX.user),
      name,
      role,
      created_at: new Date(this.now()).toISOString(),
    };
    try {
      await this.db
        .insertInto('users')
        .values({ ...user, password_hash: NO_PASSWORD, oidc_subject: subject })
        .execute();
    } catch (err) {
      if (isUniqueViolation(err))
        throw new ConflictError(
          CODES.invalidValue,
          `a dashboard user named ${quote(name)} exists already and signs in with a password: an admin deletes or renames it first`,
        );
      throw err;
    }
    return user;
  }

  /** How many users have `role` (an admin may not remove the last admin). */
  async countWithRole(role: Role): Promise<number> {
    const row = await this.db
      .selectFrom('users')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('role', '=', role)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Delete user `id` with their sessions; false when there is no such user. */
  async delete(id: string): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('user_sessions').where('user_id', '=', id).execute();
      const res = await trx.deleteFrom('users').where('id', '=', id).executeTakeFirst();
      return res.numDeletedRows > 0n;
    });
  }

  /**
   * Delete the user named `name` with their sessions (also removed here, since SQLite enforces the
   * cascade only with foreign keys switched on); false when there is no such user.
   */
  async deleteByName(name: string): Promise<boolean> {
    return this.endSessionsOf(name, async (trx, id) => {
      await trx.deleteFrom('users').where('id', '=', id).execute();
    });
  }

  /**
   * Give the user named `name` a new password and end all their sessions, so a leaked session
   * does not outlive the password change; false when there is no such user.
   */
  async setPassword(name: string, password: string): Promise<boolean> {
    checkPassword(password);
    const hash = await hashPassword(password);
    return this.endSessionsOf(name, async (trx, id) => {
      await trx.updateTable('users').set({ password_hash: hash }).where('id', '=', id).execute();
    });
  }

  /**
   * In one transaction: end every session of the user named `name`, then `change` them; false
   * (and nothing done) when there is no such user.
   */
  private async endSessionsOf(
    name: string,
    change: (trx: Transaction<Database>, id: string) => Promise<void>,
  ): Promise<boolean> {
    return this.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('users')
        .select('id')
        .where('name', '=', name)
        .executeTakeFirst();
      if (!row) return false;
      await trx.deleteFrom('user_sessions').where('user_id', '=', row.id).execute();
      await change(trx, row.id);
      return true;
    });
  }

  /** The user when `password` is theirs; takes as long for an unknown name as for a wrong password. */
  async authenticate(name: string, password: string): Promise<User | undefined> {
    const row = await this.db
      .selectFrom('users')
      .selectAll()
      .where('name', '=', name)
      .executeTakeFirst();
    const ok = await verifyPassword(password, row?.password_hash ?? (await decoyHash()));
    return row && ok ? userOf(row) : undefined;
  }

  /** A new session for `userId`; the returned token goes into the cookie and is not kept. */
  async startSession(userId: string, ttlMs: number): Promise<{ token: string; expiresMs: number }> {
    const secret = token();
    const expiresMs = this.now() + ttlMs;
    await this.db
      .insertInto('user_sessions')
      .values({
        token_hash: hashToken(secret),
        user_id: userId,
        created_at: new Date(this.now()).toISOString(),
        expires_ms: expiresMs,
      })
      .execute();
    return { token: secret, expiresMs };
  }

  /** The live session a cookie token names; expired ones are deleted on sight. */
  async session(secret: string): Promise<UserSession | undefined> {
    const row = await this.db
      .selectFrom('user_sessions')
      .innerJoin('users', 'users.id', 'user_sessions.user_id')
      .select([...USER_COLUMNS, 'user_sessions.expires_ms'])
      .where('user_sessions.token_hash', '=', hashToken(secret))
      .executeTakeFirst();
    if (!row) return undefined;
    const expiresMs = Number(row.expires_ms);
    if (expiresMs <= this.now()) {
      await this.endSession(secret);
      return undefined;
    }
    return { user: userOf(row), expiresMs };
  }

  async endSession(secret: string): Promise<void> {
    await this.db.deleteFrom('user_sessions').where('token_hash', '=', hashToken(secret)).execute();
  }

  /** Drop every expired session (called now and then; a lookup also drops the one it finds). */
  async pruneSessions(): Promise<void> {
    await this.db.deleteFrom('user_sessions').where('expires_ms', '<=', this.now()).execute();
  }

  /**
   * A fresh one-time setup token (the link printed at first start); any earlier one stops working,
   * so only the newest link printed is valid.
   */
  async issueSetupToken(ttlMs: number): Promise<string> {
    const secret = token();
    await this.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('user_setup_tokens').execute();
      await trx
        .insertInto('user_setup_tokens')
        .values({ token_hash: hashToken(secret), expires_ms: this.now() + ttlMs })
        .execute();
    });
    return secret;
  }

  /** True when `secret` is the live setup token and no user exists yet. */
  async setupTokenValid(secret: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('user_setup_tokens')
      .select('expires_ms')
      .where('token_hash', '=', hashToken(secret))
      .executeTakeFirst();
    return row !== undefined && Number(row.expires_ms) > this.now() && (await this.count()) === 0;
  }

  /**
   * Create the first user with the setup token, which is then spent. Deleting the token first
   * means two browsers racing with one link cannot both create a user.
   */
  async createFirstUser(secret: string, name: string, password: string): Promise<User | undefined> {
    checkUserInput(name, password);
    if (!(await this.setupTokenValid(secret))) return undefined;
    const res = await this.db
      .deleteFrom('user_setup_tokens')
      .where('token_hash', '=', hashToken(secret))
      .executeTakeFirst();
    if (res.numDeletedRows === 0n) return undefined;
    // The person with the setup link runs the server: the first user is an admin.
    return this.create(name, password, 'admin');
  }
}
