/**
 * Benchmarks run each party (service, edge, agent, load generator) as a child process of the same
 * script, so each has its own event loop as in production. A child is started with a role and an
 * optional JSON argument, answers with one JSON line on stdout once it is ready, and keeps running
 * until it is killed (or, with `stdin: 'pipe'`, until its stdin ends).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A started role: its process and the JSON line it answered with. */
export interface RoleChild<T> {
  proc: ChildProcess;
  reply: T;
}

/**
 * Starts roles of the script at `scriptUrl` (pass `import.meta.url`) and remembers every child
 * so that they can all be stopped together.
 * @example const roles = new RoleProcesses(import.meta.url); const svc = await roles.start<{ port: number }>('service');
 */
export class RoleProcesses {
  readonly children: ChildProcess[] = [];
  private readonly script: string;

  constructor(scriptUrl: string) {
    this.script = fileURLToPath(scriptUrl);
  }

  /** Spawn `role` and wait for its first line of JSON. */
  async spawn<T>(
    role: string,
    arg?: unknown,
    options: { stdin?: 'pipe' | 'ignore'; nodeArgs?: string[] } = {},
  ): Promise<RoleChild<T>> {
    const args = [
      ...(options.nodeArgs ?? []),
      ...['--import', 'tsx', this.script, role],
      ...(arg === undefined ? [] : [JSON.stringify(arg)]),
    ];
    const proc = spawn(process.execPath, args, {
      stdio: [options.stdin ?? 'ignore', 'pipe', 'inherit'],
    });
    this.children.push(proc);
    const lines = createInterface({ input: proc.stdout! });
    const reply = await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      proc.once('exit', (code) =>
        reject(new Error(`${role} exited with ${code} before answering`)),
      );
    });
    lines.close();
    return { proc, reply: JSON.parse(reply) as T };
  }

  /** Spawn `role` and return only its answer. */
  async start<T>(role: string, arg?: unknown): Promise<T> {
    return (await this.spawn<T>(role, arg)).reply;
  }

  /** Signal every child started so far. */
  killAll(signal: NodeJS.Signals = 'SIGTERM'): void {
    for (const proc of this.children) proc.kill(signal);
  }
}

/** Print `value` as the one JSON line a role answers with. */
export function answer(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

/** For `.catch(fail)` on a role or main: print the error and exit non-zero. */
export function fail(err: unknown): never {
  console.error(err);
  process.exit(1);
}

/** Exit with 130 on SIGINT/SIGTERM, so that the 'exit' handlers stop what was started. */
export function exitOnSignals(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => process.exit(130));
  }
}

/** What a script does in each child role (given the role's JSON argument), and as the parent. */
export interface RoleHandlers {
  /** The parent: runs when no known role is named; every child is killed when it ends. */
  main: () => Promise<void>;
  [role: string]: (arg: unknown) => Promise<unknown>;
}

/**
 * Run the role named by `argv[2]` (with `argv[3]` parsed as its JSON argument), exiting non-zero
 * if it fails; without one, run `main`, then kill every child of `roles` and exit 0 (1 on error).
 * @example runRoles(roles, { main, service: () => startBulkService().then(answer) });
 */
export function runRoles(roles: RoleProcesses, handlers: RoleHandlers): void {
  const role = process.argv[2];
  const arg = process.argv[3] ? (JSON.parse(process.argv[3]) as unknown) : undefined;
  const handler = role !== undefined && role !== 'main' ? handlers[role] : undefined;
  if (handler) {
    handler(arg).catch(fail);
    return;
  }
  const shutdown = (code: number): never => {
    roles.killAll();
    process.exit(code);
  };
  handlers.main().then(
    () => shutdown(0),
    (err: unknown) => {
      console.error(err);
      shutdown(1);
    },
  );
}
