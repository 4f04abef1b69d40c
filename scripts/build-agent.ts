// `npm run build:agent`: the self-contained agent, dist/sea/burrow-agent, a Node single executable
// application (https://nodejs.org/api/single-executable-applications.html) that runs `burrow
// agent`, `http`, `tcp`, `tls`, `start` and `config` where no Node is installed. The agent side of the CLI
// (src/cli/agent-sea.ts) is bundled into one CommonJS file with esbuild (it holds no native
// module), turned into a blob by this Node, and injected with postject into a copy of this Node's
// own binary: the executable runs on machines of this one's OS and architecture.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { inject } from 'postject';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'sea');
const bundle = join(out, 'agent.cjs');
const blob = join(out, 'agent.blob');
const executable = join(out, process.platform === 'win32' ? 'burrow-agent.exe' : 'burrow-agent');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(root, 'src', 'cli', 'agent-sea.ts')],
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  outfile: bundle,
  logLevel: 'warning',
  // The SDK reads its version from package.json next to it; in the executable it has none.
  define: { 'import.meta.url': 'undefined' },
});
const config = join(out, 'sea-config.json');
writeFileSync(
  config,
  JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true }),
);
execFileSync(process.execPath, ['--experimental-sea-config', config], { stdio: 'inherit' });
copyFileSync(process.execPath, executable);
chmodSync(executable, 0o755);
await inject(executable, 'NODE_SEA_BLOB', readFileSync(blob), {
  sentinelFuse: 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2',
  ...(process.platform === 'darwin' ? { machoSegmentName: 'NODE_SEA' } : {}),
});
if (process.platform === 'darwin') execFileSync('codesign', ['--sign', '-', executable]);
process.stdout.write(`built ${executable}\n`);
