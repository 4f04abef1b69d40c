import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  NODE_STATE_FS,
  parseState,
  StateFile,
  StateFileError,
  type StateFileSystem,
  type StoredEndpointTunnel,
  type StoredTunnel,
} from './state-file.js';

function tunnel(n: number, policy: StoredEndpointTunnel['policy'] = null): StoredEndpointTunnel {
  return {
    url: `https://device${n}.sitea.burrow.test:8443`,
    url_part: `device${n}.sitea.burrow.test`,
    protocol: 'http',
    forwards_to: `:${8000 + n}`,
    domain: `device${n}.sitea.burrow.test`,
    policy,
    created_at: '2026-01-01T00:00:00.000Z',
  };
}

/** The real file system, recording each call and failing the one `failAt` names. */
function recordingFs(failAt?: string): { fs: StateFileSystem; calls: string[] } {
  const calls: string[] = [];
  /** Record `what`; fail when `kind` (defaults to `what`) is the step to fail. */
  const step = (what: string, kind = what): void => {
    calls.push(what);
    if (kind === failAt)
      throw Object.assign(new Error(`injected ${kind} failure`), { code: 'EIO' });
  };
  const fs: StateFileSystem = {
    readFile: (path) => NODE_STATE_FS.readFile(path),
    mkdir: (path) => NODE_STATE_FS.mkdir(path),
    unlink: async (path) => {
      calls.push(`unlink ${path}`);
      await NODE_STATE_FS.unlink(path);
    },
    rename: async (from, to) => {
      step(`rename ${from} -> ${to}`, 'rename');
      await NODE_STATE_FS.rename(from, to);
    },
    open: async (path, flags, mode) => {
      step(`open ${path} ${flags}`);
      const handle = await NODE_STATE_FS.open(path, flags, mode);
      const kind = flags === 'r' ? 'folder' : 'file';
      return {
        writeFile: async (data) => {
          step(`write ${kind}`);
          await handle.writeFile(data);
        },
        sync: async () => {
          try {
            step(`sync ${kind}`);
          } catch (err) {
            await handle.close();
            throw err;
          }
          await handle.sync();
        },
        close: async () => {
          calls.push(`close ${kind}`);
          await handle.close();
        },
      };
    },
  };
  return { fs, calls };
}

describe('StateFile', () => {
  let dir: string;
  let path: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'burrow-agent-state-'));
    path = join(dir, 'tunnels.json');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('starts empty without a file, and reads back what it saved (mode 0600)', async () => {
    const state = new StateFile(path);
    expect(await state.load()).toEqual({ tunnels: [], existed: false });
    const saved = [tunnel(1), tunnel(2, { inbound: [{ actions: [{ type: 'deny' }] }] })];
    await state.save(saved);
    expect(await state.load()).toEqual({ tunnels: saved, existed: true });
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({ version: 1, tunnels: saved });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir)).toEqual(['tunnels.json']);
  });

  it('creates a missing folder for the file', async () => {
    const nested = new StateFile(join(dir, 'a', 'b', 'tunnels.json'));
    await nested.save([tunnel(1)]);
    expect((await nested.load()).tunnels).toEqual([tunnel(1)]);
  });

  it('writes a temp file in the same folder, fsyncs it, renames it over, then fsyncs the folder', async () => {
    const { fs, calls } = recordingFs();
    await new StateFile(path, fs).save([tunnel(1)]);
    const temp = /^open (.+) wx$/.exec(calls[0]!)?.[1];
    expect(temp).toBeDefined();
    expect(dirname(temp!)).toBe(dir);
    expect(temp).not.toBe(path);
    expect(calls).toEqual([
      `open ${temp} wx`,
      'write file',
      'sync file',
      'close file',
      `rename ${temp} -> ${path}`,
      `open ${dir} r`,
      'sync folder',
      'close folder',
    ]);
  });

  it.each(['write file', 'sync file', 'rename'])(
    'keeps the previous file whole and leaves no temp file when %s fails',
    async (failAt) => {
      await new StateFile(path).save([tunnel(1)]);
      const before = readFileSync(path, 'utf8');
      const { fs } = recordingFs(failAt);
      await expect(new StateFile(path, fs).save([tunnel(1), tunnel(2)])).rejects.toThrow(
        `cannot write the state file ${path}: injected ${failAt} failure`,
      );
      expect(readFileSync(path, 'utf8')).toBe(before);
      expect(readdirSync(dir)).toEqual(['tunnels.json']);
    },
  );

  it('never shows a reader a partly written file', async () => {
    const big = {
      on_http_request: [
        { actions: [{ type: 'log', config: { metadata: { pad: 'x'.repeat(300_000) } } }] },
      ],
    };
    const state = new StateFile(path);
    await state.save([tunnel(0, big)]);
    let writing = true;
    let reads = 0;
    const reader = (async () => {
      while (writing) {
        const text = await readFile(path, 'utf8');
        expect(() => parseState(text, path)).not.toThrow();
        expect(text.length).toBeGreaterThan(300_000);
        reads++;
      }
    })();
    for (let i = 1; i <= 15; i++) {
      await state.save(Array.from({ length: (i % 4) + 1 }, (_, n) => tunnel(n, big)));
    }
    writing = false;
    await reader;
    expect(reads).toBeGreaterThan(5);
  });

  it('runs saves one at a time in order: the last one asked for wins', async () => {
    const state = new StateFile(path);
    await Promise.all([1, 2, 3, 4, 5].map((n) => state.save([tunnel(n)])));
    expect((await state.load()).tunnels).toEqual([tunnel(5)]);
  });

  it('keeps endpoint options with their secrets, in a file only its owner reads', async () => {
    const withOptions: StoredTunnel = {
      ...tunnel(1),
      options: {
        basic_auth: ['ops:correct-horse'],
        oauth: { provider: 'google', client_id: 'a', client_secret: 'b' },
      },
    };
    const state = new StateFile(path);
    await state.save([withOptions, tunnel(2)]);
    expect(await state.load()).toEqual({ tunnels: [withOptions, tunnel(2)], existed: true });
    expect(readFileSync(path, 'utf8')).toContain('ops:correct-horse');
    if (process.platform !== 'win32') expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  it('treats a blank file as an empty state', async () => {
    writeFileSync(path, '  \n');
    expect(await new StateFile(path).load()).toEqual({ tunnels: [], existed: true });
  });

  it.each([
    ['not JSON', '{"version":1,"tunnels":[', /is not valid JSON/],
    ['an array', '[]', /is corrupt: it holds an array, not an object/],
    ['another version', '{"version":2,"tunnels":[]}', /has version 2; this agent reads version 1/],
    ['no tunnels list', '{"version":1}', /"tunnels" must be an array/],
    [
      'a bad tunnel',
      '{"version":1,"tunnels":[{"url":""}]}',
      /tunnels\[0\]\.url must be a non-empty string/,
    ],
    [
      'a bad protocol',
      JSON.stringify({ version: 1, tunnels: [{ ...tunnel(1), protocol: 'udp' }] }),
      /tunnels\[0\]\.protocol must be one of http, tcp, tls/,
    ],
    [
      'a bad forwards_to',
      JSON.stringify({ version: 1, tunnels: [{ ...tunnel(1), forwards_to: 'nope' }] }),
      /is corrupt: tunnels\[0\]\.forwards_to: must be <host>:<port>/,
    ],
    [
      'a bad policy',
      JSON.stringify({ version: 1, tunnels: [{ ...tunnel(1), policy: [1] }] }),
      /tunnels\[0\]\.policy must be null, an object or a string/,
    ],
    [
      'bad options',
      JSON.stringify({
        version: 1,
        tunnels: [{ ...tunnel(1), options: { basic_auth: ['ops:short'] } }],
      }),
      /is corrupt: tunnels\[0\]\.options: basic_auth\[0\]: the password/,
    ],
    [
      'an unknown option',
      JSON.stringify({ version: 1, tunnels: [{ ...tunnel(1), options: { nope: true } }] }),
      /is corrupt: tunnels\[0\]\.options: unknown field 'options\.nope'/,
    ],
    [
      'a url_part twice',
      JSON.stringify({ version: 1, tunnels: [tunnel(1), tunnel(1)] }),
      /the url_part device1\.sitea\.burrow\.test appears twice/,
    ],
  ])(
    'refuses a file holding %s, naming the file, and leaves it as it is',
    async (_what, text, problem) => {
      writeFileSync(path, text);
      const error = await new StateFile(path).load().then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(error).toBeInstanceOf(StateFileError);
      expect((error as Error).message).toMatch(problem);
      expect((error as Error).message).toContain(`the state file ${path} `);
      expect((error as Error).message).toContain('It was left as it is');
      expect(readFileSync(path, 'utf8')).toBe(text);
    },
  );

  it('refuses a file it cannot read', async () => {
    mkdirSync(path);
    await expect(new StateFile(path).load()).rejects.toThrow(
      new RegExp(`the state file ${path} cannot be read \\(EISDIR`),
    );
  });
});
