import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { mergeConfigSources, parseConfigText } from '../agent/ngrok-config.js';
import { configFiles, ngrokConfigPaths, pickTunnels } from './start-command.js';

const home = mkdtempSync(join(tmpdir(), 'burrow-start-unit-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('burrow start: which files, which tunnels', () => {
  it("looks where ngrok keeps its file, and in Burrow's agent config, when --config is not given", () => {
    expect(ngrokConfigPaths({ HOME: '/h' }, 'linux')).toEqual([
      '/h/.config/ngrok/ngrok.yml',
      '/h/.ngrok2/ngrok.yml',
    ]);
    expect(ngrokConfigPaths({ HOME: '/h' }, 'darwin')).toContain(
      '/h/Library/Application Support/ngrok/ngrok.yml',
    );
    const env = { HOME: home, XDG_CONFIG_HOME: join(home, 'cfg') };
    expect(configFiles({}, env)).toEqual([]);
    mkdirSync(join(home, '.ngrok2'));
    writeFileSync(join(home, '.ngrok2', 'ngrok.yml'), 'version: 2\n');
    mkdirSync(join(home, 'cfg', 'burrow'), { recursive: true });
    writeFileSync(join(home, 'cfg', 'burrow', 'config.yaml'), 'authtoken: x\n');
    expect(configFiles({}, env)).toEqual([
      join(home, 'cfg', 'burrow', 'config.yaml'),
      join(home, '.ngrok2', 'ngrok.yml'),
    ]);
    expect(configFiles({ config: ['a.yml,b.yml', 'c.yml'] }, env)).toEqual([
      'a.yml',
      'b.yml',
      'c.yml',
    ]);
  });

  it('starts the names given, all, or none; exactly one of them', () => {
    const config = mergeConfigSources([
      parseConfigText(
        'tunnels:\n  a: {proto: http, addr: 1}\n  b: {proto: tcp, addr: 2}\n',
        'x.yml',
      ),
    ]);
    expect(pickTunnels(config, ['b'], {}).map((t) => t.name)).toEqual(['b']);
    expect(pickTunnels(config, [], { all: true }).map((t) => t.name)).toEqual(['a', 'b']);
    expect(pickTunnels(config, [], { none: true })).toEqual([]);
    expect(() => pickTunnels(config, [], {})).toThrow(/--all .* or --none/);
    expect(() => pickTunnels(config, ['a'], { all: true })).toThrow(/--all .* or --none/);
    expect(() => pickTunnels(config, ['c'], {})).toThrow(
      'no tunnel or endpoint is named c in the config; they are a, b',
    );
  });
});
