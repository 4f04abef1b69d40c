/**
 * The unmodified @ngrok/ngrok as the end-to-end tests run it: in a child process of its own, since
 * `session.close()` keeps the TCP connection until the process exits (killing the child is how a
 * test drops an agent at once), in-process sessions for tests that keep the agent in the test
 * process, and the way its refusals are read.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import ngrok from '@ngrok/ngrok';
import type { EdgePorts } from './edge-listeners.js';
import { REPO_ROOT } from './server-process.js';

/**
 * An in-process @ngrok/ngrok session builder for the agent listener at 127.0.0.1:`ports.agent`
 * (or the `host:port` given), trusting `ca` and authenticating with `token`; add options, then
 * `.connect()`.
 * @example const session = await ngrokSession(ports, caPem, token).handleStopCommand(stop).connect();
 */
export function ngrokSession(
  ports: Pick<EdgePorts, 'agent'> | string,
  ca: string | Buffer,
  token: string,
): ngrok.SessionBuilder {
  return new ngrok.SessionBuilder()
    .serverAddr(typeof ports === 'string' ? ports : `127.0.0.1:${ports.agent}`)
    .caCert(typeof ca === 'string' ? Buffer.from(ca) : ca)
    .authtoken(token);
}

/**
 * `ngrokSession(ports, ca, token).connect()`: a connected in-process session with no other options.
 * @example const session = await connectNgrok(ports, caPem, await createAuthtoken(api));
 */
export function connectNgrok(
  ports: Pick<EdgePorts, 'agent'> | string,
  ca: string | Buffer,
  token: string,
): Promise<ngrok.Session> {
  return ngrokSession(ports, ca, token).connect();
}

export interface NgrokAgentOptions {
  /** `host:port` of the agent listener. */
  addr: string;
  /** PEM the agent trusts for the agent listener (replaces ngrok's own CA). */
  ca: string;
  token: string;
  /** Where the listener forwards, e.g. `http://127.0.0.1:3000`. */
  to: string;
  /** Builder calls after `.authtoken(…)`, e.g. `.handleStopCommand(() => process.exit(0))`. */
  session?: string;
  /** The listener builder, from `session`. Default `session.httpEndpoint()`. */
  listener?: string;
  /** The command that runs `node <args>` (e.g. inside another mount namespace). Default: node. */
  wrap?: (nodeArgs: string[]) => [string, string[]];
}

/** A running agent: its process, the URL it serves, and every line it printed after that. */
export interface NgrokAgent {
  child: ChildProcess;
  url: string;
  lines: string[];
}

/**
 * Start an agent process and wait until its endpoint is online; rejects with what it printed if
 * it exits first.
 * @example const agent = await spawnNgrokAgent({ addr, ca, token, to: `http://127.0.0.1:${port}` });
 */
export async function spawnNgrokAgent(options: NgrokAgentOptions): Promise<NgrokAgent> {
  const script = `
    const { default: ngrok } = await import('@ngrok/ngrok');
    const session = await new ngrok.SessionBuilder().serverAddr(process.env.ADDR)
      .caCert(Buffer.from(process.env.CA)).authtoken(process.env.TOKEN)${options.session ?? ''}
      .connect();
    const listener = await ${options.listener ?? 'session.httpEndpoint()'}.listenAndForward(process.env.TO);
    console.log(listener.url());
    setInterval(() => undefined, 60_000);`;
  const nodeArgs = ['--input-type=module', '-e', script];
  const [command, args] = options.wrap?.(nodeArgs) ?? [process.execPath, nodeArgs];
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      ADDR: options.addr,
      CA: options.ca,
      TOKEN: options.token,
      TO: options.to,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let printed = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (printed += d));
  // Lines after the URL, kept as they come (a test may watch them).
  const lines: string[] = [];
  let online = false;
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      const got = d.trim().split('\n');
      if (!online) {
        online = true;
        resolve(got.shift()!.trim());
      }
      lines.push(...got);
    });
    child.once('exit', (code) => {
      if (!online) reject(new Error(`the agent exited (${code}) before it was online: ${printed}`));
    });
  });
  return { child, url, lines };
}

/**
 * What a promise that must fail was rejected with (ngrok errors carry `errorCode`).
 * @example expect((await refusalOf(builder.connect())).errorCode).toBe('ERR_NGROK_107');
 */
export async function refusalOf(
  p: Promise<unknown>,
): Promise<{ errorCode?: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return err as { errorCode?: string; message: string };
  }
  throw new Error('expected a refusal');
}
