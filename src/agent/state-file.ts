/**
 * The device agent's state file (`--state`, default tunnels.json): the tunnels it recreates at
 * start. Every change is written before the API replies, atomically: a temporary file in the same
 * folder is written and fsync'ed, renamed over the state file, and the folder is fsync'ed, so a
 * crash or power cut leaves either the old or the new file, never a mix. A file that cannot be read
 * or understood stops the agent and is left exactly as it is, for its owner to repair.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { BurrowError, CODES } from '../core/errors.js';
import { TUNNEL_PROTOCOLS, type PolicyValue, type TunnelProtocol } from './policy.js';
import { parseForwardsTo, parseLabels } from './tunnel-input.js';
import { tunnelKey } from './tunnel-keys.js';
import { checkStoredOptions, type TunnelOptions } from './tunnel-options.js';

/** A tunnel on a URL of its own, as the state file keeps it. */
export interface StoredEndpointTunnel {
  /** The public URL the server gave. */
  url: string;
  /** The URL's host: what `DELETE /tunnels/{url_part}` takes. */
  url_part: string;
  protocol: TunnelProtocol;
  /** `<host>:<port>` as the create request gave it (empty host: localhost). */
  forwards_to: string;
  domain: string;
  /** The policy the create request gave; null when the default policy applies. */
  policy: PolicyValue | null;
  /**
   * The endpoint options the create request gave (`basic_auth`, `oauth`, …), secrets included:
   * the tunnel is bound with them again at start. Left out when there were none.
   */
  options?: TunnelOptions;
  created_at: string;
}

/**
 * A labeled tunnel as the state file keeps it: no URL, domain or policy of its own (the edge
 * whose tunnel-group backend selects its labels has them), so its labels are what names it.
 */
export interface StoredLabeledTunnel {
  protocol: 'labeled';
  labels: Record<string, string>;
  forwards_to: string;
  created_at: string;
}

/** One tunnel as the state file keeps it. */
export type StoredTunnel = StoredEndpointTunnel | StoredLabeledTunnel;

/** The file's layout; `version` lets a later agent read (and migrate) what this one wrote. */
interface StateDocument {
  version: 1;
  tunnels: StoredTunnel[];
}

/** A writable file as the state file uses it (a subset of fs/promises' FileHandle). */
export interface StateFileHandle {
  writeFile(data: string): Promise<void>;
  sync(): Promise<void>;
  close(): Promise<void>;
}

/** The file operations the state file needs; tests substitute failing ones. */
export interface StateFileSystem {
  readFile(path: string): Promise<string>;
  open(path: string, flags: string, mode?: number): Promise<StateFileHandle>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  mkdir(path: string): Promise<void>;
}

/** The real file system. */
export const NODE_STATE_FS: StateFileSystem = {
  readFile: (path) => fsp.readFile(path, 'utf8'),
  open: (path, flags, mode) => fsp.open(path, flags, mode),
  rename: (from, to) => fsp.rename(from, to),
  unlink: (path) => fsp.unlink(path),
  mkdir: async (path) => {
    await fsp.mkdir(path, { recursive: true, mode: 0o700 });
  },
};

/**
 * The state file exists but cannot be read or understood. The file is left untouched. Its code is
 * `ERR_BURROW_AGENT_STATE_FILE`.
 */
export class StateFileError extends BurrowError {
  constructor(
    readonly path: string,
    problem: string,
    options?: { cause?: unknown },
  ) {
    super(
      CODES.agentStateFile,
      500,
      `the state file ${path} ${problem}. It was left as it is: repair it, or move it away to start with no tunnels`,
      {},
      options,
    );
  }
}

/** What load() found. */
export interface LoadedState {
  tunnels: StoredTunnel[];
  /** False when there was no file yet (a first start). */
  existed: boolean;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

/** A labeled record: its labels pass the create request's checks, so it binds as it did then. */
function checkLabeled(
  t: Record<string, unknown>,
  where: string,
  path: string,
): StoredLabeledTunnel {
  for (const key of ['forwards_to', 'created_at'] as const) {
    if (typeof t[key] !== 'string' || t[key] === '') {
      throw new StateFileError(path, `is corrupt: ${where}.${key} must be a non-empty string`);
    }
  }
  let labels: Record<string, string>;
  try {
    parseForwardsTo(t.forwards_to);
    labels = parseLabels(t.labels);
  } catch (err) {
    throw new StateFileError(path, `is corrupt: ${where}.${(err as Error).message}`);
  }
  return {
    protocol: 'labeled',
    labels,
    forwards_to: t.forwards_to as string,
    created_at: t.created_at as string,
  };
}

function checkTunnel(value: unknown, index: number, path: string): StoredTunnel {
  const where = `tunnels[${index}]`;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new StateFileError(path, `is corrupt: ${where} is ${describe(value)}, not an object`);
  }
  const t = value as Record<string, unknown>;
  if (t.protocol === 'labeled') return checkLabeled(t, where, path);
  for (const key of ['url', 'url_part', 'forwards_to', 'domain', 'created_at'] as const) {
    if (typeof t[key] !== 'string' || t[key] === '') {
      throw new StateFileError(path, `is corrupt: ${where}.${key} must be a non-empty string`);
    }
  }
  try {
    parseForwardsTo(t.forwards_to);
  } catch (err) {
    throw new StateFileError(path, `is corrupt: ${where}.${(err as Error).message}`);
  }
  if (!(TUNNEL_PROTOCOLS as readonly unknown[]).includes(t.protocol)) {
    throw new StateFileError(
      path,
      `is corrupt: ${where}.protocol must be one of ${[...TUNNEL_PROTOCOLS, 'labeled'].join(', ')}`,
    );
  }
  const policy = t.policy ?? null;
  const isObject = typeof policy === 'object' && !Array.isArray(policy);
  if (policy !== null && typeof policy !== 'string' && !isObject) {
    throw new StateFileError(
      path,
      `is corrupt: ${where}.policy must be null, an object or a string`,
    );
  }
  let options: TunnelOptions | undefined;
  try {
    options = checkStoredOptions(t.options, t.protocol as TunnelProtocol);
  } catch (err) {
    throw new StateFileError(path, `is corrupt: ${where}.options: ${(err as Error).message}`);
  }
  return {
    url: t.url as string,
    url_part: t.url_part as string,
    protocol: t.protocol as TunnelProtocol,
    forwards_to: t.forwards_to as string,
    domain: t.domain as string,
    policy: policy as PolicyValue | null,
    ...(options ? { options } : {}),
    created_at: t.created_at as string,
  };
}

/**
 * Parse the text of a state file; throws {@link StateFileError} naming `path` and the problem.
 * Blank text is an empty state (a file made with `touch`).
 * @example parseState('{"version":1,"tunnels":[]}', 'tunnels.json') // []
 */
export function parseState(text: string, path: string): StoredTunnel[] {
  if (text.trim() === '') return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new StateFileError(path, `is not valid JSON (${(err as Error).message})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new StateFileError(path, `is corrupt: it holds ${describe(value)}, not an object`);
  }
  const doc = value as Record<string, unknown>;
  if (doc.version !== 1) {
    throw new StateFileError(
      path,
      `has version ${JSON.stringify(doc.version)}; this agent reads version 1`,
    );
  }
  if (!Array.isArray(doc.tunnels)) {
    throw new StateFileError(path, 'is corrupt: "tunnels" must be an array');
  }
  const tunnels = doc.tunnels.map((t, i) => checkTunnel(t, i, path));
  const seen = new Set<string>();
  for (const t of tunnels) {
    const key = tunnelKey(t);
    if (seen.has(key)) {
      throw new StateFileError(path, `is corrupt: the url_part ${key} appears twice`);
    }
    seen.add(key);
  }
  return tunnels;
}

/**
 * The state file at `path`. Saves run one at a time, in the order they were asked for.
 * @example
 * const state = new StateFile('tunnels.json');
 * const { tunnels } = await state.load();
 * await state.save([...tunnels, tunnel]);
 */
export class StateFile {
  /** Absolute path of the file. */
  readonly path: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    path: string,
    private readonly fs: StateFileSystem = NODE_STATE_FS,
  ) {
    this.path = resolve(path);
  }

  /** Read the tunnels; no file is an empty state, anything unreadable a StateFileError. */
  async load(): Promise<LoadedState> {
    let text: string;
    try {
      text = await this.fs.readFile(this.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { tunnels: [], existed: false };
      throw new StateFileError(this.path, `cannot be read (${(err as Error).message})`);
    }
    return { tunnels: parseState(text, this.path), existed: true };
  }

  /** Replace the file's content with `tunnels`, atomically and durably. */
  save(tunnels: readonly StoredTunnel[]): Promise<void> {
    const doc: StateDocument = { version: 1, tunnels: [...tunnels] };
    const text = `${JSON.stringify(doc, null, 2)}\n`;
    const run = this.queue.then(() => this.write(text));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async write(text: string): Promise<void> {
    const dir = dirname(this.path);
    const temp = join(dir, `.${basename(this.path)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      await this.fs.mkdir(dir);
      const handle = await this.fs.open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(text);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await this.fs.rename(temp, this.path);
    } catch (err) {
      await this.fs.unlink(temp).catch(() => undefined);
      throw new Error(`cannot write the state file ${this.path}: ${(err as Error).message}`, {
        cause: err,
      });
    }
    await this.syncFolder(dir);
  }

  /** Make the rename itself durable. */
  private async syncFolder(dir: string): Promise<void> {
    let handle: StateFileHandle;
    try {
      handle = await this.fs.open(dir, 'r');
    } catch (err) {
      // Some platforms (Windows) cannot open a folder; the rename is as durable as they allow.
      if (['EISDIR', 'EPERM', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? '')) return;
      throw new Error(`cannot sync the folder of the state file ${this.path}: ${String(err)}`);
    }
    try {
      await handle.sync();
    } catch (err) {
      if (!['EINVAL', 'EBADF'].includes((err as NodeJS.ErrnoException).code ?? '')) {
        throw new Error(`cannot sync the folder of the state file ${this.path}: ${String(err)}`);
      }
    } finally {
      await handle.close();
    }
  }
}
