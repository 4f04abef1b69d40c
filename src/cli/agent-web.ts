/**
 * The agent API and inspector of the CLI agents (`burrow http|tcp|tls`, `burrow start`):
 * starting src/agent/agent-web.ts for a session with the `--web-addr` and `--web-auth` flags.
 * Loaded only once a tunnel is online, so `burrow --version` does not load it.
 */
import { startAgentWeb, type AgentWeb } from '../agent/agent-web.js';
import { adoptedDefinition } from '../agent/named-tunnels.js';
import type { TunnelDefinition } from '../agent/tunnel-definition.js';
import { BurrowError } from '../core/errors.js';
import type { Endpoint } from '../sdk/endpoints.js';
import type { Session } from '../sdk/session.js';
import type { WebFlags } from './agent-web-options.js';
import { BURROW_VERSION } from './version.js';

/**
 * Start the agent API for `session` with the flags, environment and config file's `web_addr`;
 * prints where it listens. When the address was not chosen (the default 4040 and the ports after
 * it are taken) the agent runs without it and says so; a chosen address that fails stops it.
 */
export async function startCliAgentWeb(
  session: Session,
  flags: WebFlags,
  configWebAddr: string | false | undefined,
  env: NodeJS.ProcessEnv,
  io: { out: NodeJS.WritableStream; err: NodeJS.WritableStream },
  logBytes?: number,
): Promise<AgentWeb> {
  const chosen = flags.webAddr ?? env.BURROW_WEB_ADDR ?? configWebAddr;
  const options = {
    session,
    credential: flags.webAuth ?? (env.BURROW_WEB_AUTH || undefined),
    logBytes,
    version: BURROW_VERSION,
    warn: (line: string) => io.err.write(`warning: ${line}\n`),
  };
  let web: AgentWeb;
  try {
    web = await startAgentWeb({ ...options, webAddr: chosen });
  } catch (err) {
    if (chosen !== undefined || !(err instanceof BurrowError)) throw err;
    io.err.write(`warning: ${err.message}; running without the agent API\n`);
    web = await startAgentWeb({ ...options, webAddr: false });
  }
  if (web.listener) io.out.write(`Web Interface http://${web.listener.address}\n`);
  return web;
}

/**
 * Serve until SIGINT or SIGTERM (code 0), the session's end (0), or `stop(code)`: then unbind every
 * tunnel of the agent (waiting 2 s at most), close the agent API and the session, and resolve
 * `done` with the code. The loop of `burrow http|tcp|tls` and `burrow start`.
 * @example const { done } = serveUntilStopped(session, web); process.exitCode = await done;
 */
export function serveUntilStopped(
  session: Session,
  web: AgentWeb,
): { done: Promise<number>; stop: (code: number) => void } {
  let stop: (code: number) => void = () => undefined;
  const done = new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (): void => stop(0);
    stop = (code) => {
      if (stopping) return;
      stopping = true;
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      const deadline = new Promise((r) => setTimeout(r, 2000).unref());
      void Promise.race([web.tunnels.closeAll(), deadline])
        .then(() => web.close())
        .then(() => session.close())
        .then(() => resolve(code));
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    session.on('close', () => stop(0));
  });
  return { done, stop };
}

/**
 * The definition of the one tunnel of `burrow http|tcp|tls`, named `command_line` as ngrok names it.
 * @example quickTunnelDefinition('http', '3000', endpoint)
 */
export function quickTunnelDefinition(
  proto: 'http' | 'tcp' | 'tls',
  target: string,
  endpoint: Endpoint,
): TunnelDefinition {
  const labels = endpoint.labels && { ...endpoint.labels };
  return adoptedDefinition('command_line', labels ? 'labeled' : proto, target, { labels });
}
