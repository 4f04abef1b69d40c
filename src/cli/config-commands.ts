/**
 * `burrow config check` and `burrow config upgrade`, as ngrok's agent has them: check says what
 * `burrow start` would read from the config files (or which key is wrong, with its file and
 * line); upgrade rewrites a version 2 ngrok.yml as version 3 (the agent keys under `agent:`,
 * `server_addr` → `connect_url`, `root_cas` → `connect_cas`; tunnels kept as they are, as ngrok
 * keeps them). Their work is loaded when they run, so registering them costs nothing.
 */
import type { Command } from 'commander';

/** The top-level keys of a version 2 file that move under `agent:` in version 3, renamed. */
const V3_NAMES: Record<string, string> = { server_addr: 'connect_url', root_cas: 'connect_cas' };

/**
 * A version 2 file's text as version 3; undefined when it is version 3 already.
 * @example upgradeConfigText('version: 2\nauthtoken: x\n') // 'version: "3"\nagent:\n  authtoken: x\n'
 */
export async function upgradeConfigText(text: string, path: string): Promise<string | undefined> {
  const { parseConfigText, mergeConfigSources } = await import('../agent/ngrok-config.js');
  const source = parseConfigText(text, path);
  const config = mergeConfigSources([source]); // refuses what version 3 could not hold either
  if (config.version === 3) return undefined;
  const { stringify } = await import('yaml');
  const agent: Record<string, unknown> = {};
  const out: Record<string, unknown> = { version: '3', agent };
  for (const [key, value] of Object.entries(source.value)) {
    if (key === 'version') continue;
    if (key === 'tunnels') out.tunnels = value;
    else agent[V3_NAMES[key] ?? key] = value;
  }
  return stringify(out);
}

/**
 * Add `check` and `upgrade` to the `burrow config` command.
 * @example registerConfigFileCommands(program.command('config'));
 */
export function registerConfigFileCommands(config: Command): void {
  config
    .command('check')
    .description(
      'check the config files burrow start reads (ngrok.yml version 2 or 3): every key known and honoured',
    )
    .option(
      '--config <file>',
      'a config file; repeat it (or separate with commas) to check several merged',
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .action(async (flags: { config?: string[] }) => {
      const { loadNgrokConfig } = await import('./start-command.js');
      const { files, config: read } = loadNgrokConfig(flags, process.env);
      for (const where of read.ignored) process.stdout.write(`ignored: ${where}\n`);
      const names = read.tunnels.map(
        (t) => `${t.name} (${t.kind === 'endpoint' ? 'endpoint' : t.proto})`,
      );
      process.stdout.write(
        `Valid configuration (version ${read.version}) in ${files.join(', ')}: ${names.length > 0 ? names.join(', ') : 'no tunnels or endpoints'}\n`,
      );
    });
  config
    .command('upgrade')
    .description(
      'rewrite a version 2 ngrok.yml as version 3 (agent keys under agent:, tunnels kept)',
    )
    .option('--config <file>', 'the file to upgrade (default: the ngrok.yml burrow start finds)')
    .option('--dry-run', 'print the version 3 file instead of writing it')
    .action(async (flags: { config?: string; dryRun?: boolean }) => {
      const { readFileSync, renameSync, writeFileSync, statSync } = await import('node:fs');
      const { configFiles } = await import('./start-command.js');
      const path = flags.config ?? configFiles({}, process.env).at(-1);
      if (path === undefined) throw new Error('no config file to upgrade: pass --config ngrok.yml');
      const upgraded = await upgradeConfigText(readFileSync(path, 'utf8'), path);
      if (upgraded === undefined) {
        process.stdout.write(`${path} is version 3 already\n`);
        return;
      }
      if (flags.dryRun) {
        process.stdout.write(upgraded);
        return;
      }
      const temp = `${path}.${process.pid}.tmp`;
      // The file holds the authtoken: keep its mode.
      writeFileSync(temp, upgraded, { mode: statSync(path).mode & 0o777 });
      renameSync(temp, path);
      process.stdout.write(`Upgraded ${path} to version 3\n`);
    });
}
