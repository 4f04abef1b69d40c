import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, REPO_ROOT } from './support/server-process.js';

/**
 * The README runs as written (issue 34): its ```sh blocks, in order, in one bash (`set -euo
 * pipefail`), in an empty folder, with `burrow` on the PATH as `npm install -g .` puts it; and so
 * does the walkthrough of docs/device-agent.md (the blocks of its "## Walkthrough" section).
 *
 * The convention, for whoever edits the README: every ```sh block runs, unless the line right
 * before it is an HTML comment `<!-- readme-test: skip (why) -->` (installing, a public address).
 * ```text and ```json blocks show output and never run. A block checks its own results (`jq -e`,
 * `curl -f`, `set -e`), as a reader would see them fail.
 *
 * Only the ports change, so that the walk cannot collide with anything on the machine: the
 * server's listeners come from their `BURROW_*_LISTEN` variables on free ports, agents find the
 * agent listener through `BURROW_SERVER_ADDR`, the device agent its API through
 * `BURROW_AGENT_API_LISTEN`, and in the blocks' text the API's `:4000`, the HTTPS port `8443`, the
 * device agent API's `:8000` and the local services' `3000`, `8001` and `8002` become free ports.
 * Run `npm run build` first.
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
function shellBlocks(markdown: string, section?: string): ShellBlock[] {
  let lines = markdown.split('\n');
  let offset = 0;
  if (section !== undefined) {
    // Only the section's own blocks: from its heading to the next heading of its level.
    offset = lines.indexOf(section);
    const level = section.split(' ')[0]! + ' ';
    const end = lines.findIndex((l, i) => i > offset && l.startsWith(level));
    lines = lines.slice(offset, end < 0 ? undefined : end);
  }
  const blocks: ShellBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```sh') continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== '```') end++;
    const skipped = i > 0 && SKIP_MARK.test(lines[i - 1]!);
    if (!skipped) {
      blocks.push({ line: offset + start + 1, text: lines.slice(start, end).join('\n') + '\n' });
    }
    i = end;
  }
  return blocks;
}

/** The free ports a walk runs on, in place of the documented defaults. */
type Ports = Record<
  'api' | 'agent' | 'http' | 'https' | 'tcp' | 'agentApi' | 'web' | 'web2',
  number
>;

async function freePorts(): Promise<Ports> {
  const names = ['api', 'agent', 'http', 'https', 'tcp', 'agentApi', 'web', 'web2'] as const;
  const ports: Partial<Ports> = {};
  for (const name of names) ports[name] = await freePort();
  return ports as Ports;
}

/** A block's text with the documented ports made free ones. */
function onFreePorts(text: string, port: Ports): string {
  return text
    .replaceAll(':4000', `:${port.api}`)
    .replaceAll(':8000', `:${port.agentApi}`)
    .replaceAll('8443', String(port.https))
    .replaceAll('3000', String(port.web))
    .replaceAll('8001', String(port.web))
    .replaceAll('8002', String(port.web2));
}

describe('the documents that run as written', () => {
  const work = mkdtempSync(join(tmpdir(), 'burrow-readme-'));
  const groups: number[] = [];

  afterAll(() => {
    // Each walk's last block stops its background jobs; this is for a walk that failed midway.
    for (const pid of groups) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    rmSync(work, { recursive: true, force: true });
  });

  /** Run the blocks of `file` (of `section` only, when given) in one bash; assert it got through. */
  async function walk(file: string, section?: string, minBlocks = 4): Promise<void> {
    const blocks = shellBlocks(readFileSync(join(REPO_ROOT, file), 'utf8'), section);
    expect(blocks.length).toBeGreaterThan(minBlocks);
    const port = await freePorts();
    const dir = join(work, file.replace(/\W/g, '-'));
    const bin = join(dir, 'bin');
    const folder = join(dir, 'walk');
    mkdirSync(bin, { recursive: true });
    mkdirSync(folder, { recursive: true });
    const script = [
      'set -euo pipefail',
      ...blocks.map((b) => `echo "### ${file} line ${b.line}" >&2\n${onFreePorts(b.text, port)}`),
      'echo "### the walk is over" >&2',
    ].join('\n');
    writeFileSync(join(dir, 'walk.sh'), script);
    // `burrow` on the PATH, running this clone's build, as `npm install -g .` links it.
    writeFileSync(
      join(bin, 'burrow'),
      `#!/bin/sh\nexec "${process.execPath}" "${join(REPO_ROOT, 'bin', 'burrow.js')}" "$@"\n`,
    );
    chmodSync(join(bin, 'burrow'), 0o755);
    const env: NodeJS.ProcessEnv = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('BURROW_')) env[k] = v;
    Object.assign(env, {
      PATH: [bin, process.env.PATH ?? ''].join(delimiter),
      HOME: dir,
      XDG_CONFIG_HOME: join(dir, 'config'),
      BURROW_API_LISTEN: `127.0.0.1:${port.api}`,
      BURROW_AGENT_LISTEN: `127.0.0.1:${port.agent}`,
      BURROW_HTTP_LISTEN: `127.0.0.1:${port.http}`,
      BURROW_HTTPS_LISTEN: `127.0.0.1:${port.https}`,
      BURROW_TCP_PORTS: `${port.tcp}-${port.tcp}`,
      BURROW_SERVER_ADDR: `127.0.0.1:${port.agent}`,
      BURROW_AGENT_API_LISTEN: `127.0.0.1:${port.agentApi}`,
    });

    // Its own process group, so that afterAll can stop whatever a failed walk left running.
    const bash = spawn('bash', [join(dir, 'walk.sh')], { cwd: folder, env, detached: true });
    if (bash.pid !== undefined) groups.push(bash.pid);
    let out = '';
    let err = '';
    bash.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    bash.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const timer = setTimeout(() => bash.pid && process.kill(-bash.pid, 'SIGKILL'), 150_000);
    const code = await new Promise<number | null>((resolve) => bash.once('close', resolve));
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
  }

  it('finds the blocks it runs and honours the skip mark and the section', () => {
    const sample = '```sh\necho one\n```\n<!-- readme-test: skip (no) -->\n```sh\nexit 1\n```\n';
    expect(shellBlocks(sample)).toEqual([{ line: 2, text: 'echo one\n' }]);
    const sections = '## A\n```sh\necho a\n```\n## B\n```sh\necho b\n```\n';
    expect(shellBlocks(sections, '## B')).toEqual([{ line: 7, text: 'echo b\n' }]);
  });

  it('runs every shell block of README.md in order against a fresh server', async () => {
    await walk('README.md');
  }, 180_000);

  it("runs docs/device-agent.md's walkthrough in order against a fresh server", async () => {
    await walk('docs/device-agent.md', '## Walkthrough');
  }, 180_000);
});
