import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, REPO_ROOT } from './support/server-process.js';

/**
 * The README runs as written (issue 34): its ```sh blocks, in order, in one bash (`set -euo
 * pipefail`), in an empty folder, with `burrow` on the PATH as `npm install -g .` puts it.
 *
 * The convention, for whoever edits the README: every ```sh block runs, unless the line right
 * before it is an HTML comment `<!-- readme-test: skip (why) -->` (installing, a public address).
 * ```text and ```json blocks show output and never run. A block checks its own results (`jq -e`,
 * `curl -f`, `set -e`), as a reader would see them fail.
 *
 * Only the ports change, so that the walk cannot collide with anything on the machine: the
 * server's listeners come from their `BURROW_*_LISTEN` variables on free ports, agents find the
 * agent listener through `BURROW_SERVER_ADDR`, and in the blocks' text the API's `:4000`, the
 * HTTPS port `8443` and the local service's `3000` become free ports. Run `npm run build` first.
 */

const SKIP_MARK = /<!--\s*readme-test:\s*skip\b/;

/** One runnable block: its text and the README line it starts on. */
interface ShellBlock {
  line: number;
  text: string;
}

/**
 * The ```sh blocks of a Markdown text, without those marked `<!-- readme-test: skip -->`.
 * @example shellBlocks('```sh\necho hi\n```\n') // [{ line: 2, text: 'echo hi\n' }]
 */
function shellBlocks(markdown: string): ShellBlock[] {
  const lines = markdown.split('\n');
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```sh') continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== '```') end++;
    const skipped = i > 0 && SKIP_MARK.test(lines[i - 1]!);
    if (!skipped) blocks.push({ line: start + 1, text: lines.slice(start, end).join('\n') + '\n' });
    i = end;
  }
  return blocks;
}

describe('the README walk-through', () => {
  const work = mkdtempSync(join(tmpdir(), 'burrow-readme-'));
  let bash: ReturnType<typeof spawn> | undefined;

  afterAll(() => {
    // The walk's last block stops its background jobs; this is for a walk that failed midway.
    if (bash?.pid !== undefined) {
      try {
        process.kill(-bash.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    rmSync(work, { recursive: true, force: true });
  });

  it('finds the blocks it runs and honours the skip mark', () => {
    const sample = '```sh\necho one\n```\n<!-- readme-test: skip (no) -->\n```sh\nexit 1\n```\n';
    expect(shellBlocks(sample)).toEqual([{ line: 2, text: 'echo one\n' }]);
  });

  it('runs every shell block of README.md in order against a fresh server', async () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    const blocks = shellBlocks(readme);
    expect(blocks.length).toBeGreaterThan(4);
    const port = {
      api: await freePort(),
      agent: await freePort(),
      http: await freePort(),
      https: await freePort(),
      tcp: await freePort(),
      web: await freePort(),
    };
    const script = [
      'set -euo pipefail',
      ...blocks.map((b) => {
        const text = b.text
          .replaceAll(':4000', `:${port.api}`)
          .replaceAll('8443', String(port.https))
          .replaceAll('3000', String(port.web));
        return `echo "### README.md line ${b.line}" >&2\n${text}`;
      }),
      'echo "### the walk is over" >&2',
    ].join('\n');
    writeFileSync(join(work, 'walk.sh'), script);

    // `burrow` on the PATH, running this clone's build, as `npm install -g .` links it.
    const bin = join(work, 'bin');
    const folder = join(work, 'walk');
    for (const dir of [bin, folder]) rmSync(dir, { recursive: true, force: true });
    mkdirSync(bin);
    mkdirSync(folder);
    writeFileSync(
      join(bin, 'burrow'),
      `#!/bin/sh\nexec "${process.execPath}" "${join(REPO_ROOT, 'bin', 'burrow.js')}" "$@"\n`,
    );
    chmodSync(join(bin, 'burrow'), 0o755);
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BURROW_')) env[k] = v;
    Object.assign(env, {
      PATH: [bin, process.env.PATH ?? ''].join(delimiter),
      HOME: work,
      XDG_CONFIG_HOME: join(work, 'config'),
      BURROW_API_LISTEN: `127.0.0.1:${port.api}`,
      BURROW_AGENT_LISTEN: `127.0.0.1:${port.agent}`,
      BURROW_HTTP_LISTEN: `127.0.0.1:${port.http}`,
      BURROW_HTTPS_LISTEN: `127.0.0.1:${port.https}`,
      BURROW_TCP_PORTS: `${port.tcp}-${port.tcp}`,
      BURROW_SERVER_ADDR: `127.0.0.1:${port.agent}`,
    });

    // Its own process group, so that afterAll can stop whatever a failed walk left running.
    bash = spawn('bash', [join(work, 'walk.sh')], { cwd: folder, env, detached: true });
    let out = '';
    let err = '';
    bash.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    bash.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    const timer = setTimeout(() => bash?.pid && process.kill(-bash.pid, 'SIGKILL'), 150_000);
    const code = await new Promise<number | null>((resolve) => bash!.once('close', resolve));
    clearTimeout(timer);
    const failedAt = [...err.matchAll(/^### (.*)$/gm)].at(-1)?.[1];
    let log = '';
    try {
      log = readFileSync(join(folder, 'burrow.log'), 'utf8').slice(-3000);
    } catch {
      // The server never started.
    }
    expect(
      { code, failedAt },
      `stdout:\n${out}\nstderr:\n${err}\nburrow.log (end):\n${log}`,
    ).toEqual({ code: 0, failedAt: 'the walk is over' });
  }, 180_000);
});
