/**
 * The command of an SSH tunnel: what follows the host in `ssh -R 0:localhost:3000 host http
 * --basic-auth 'ops:pw'`, as the edge receives it (one string: OpenSSH joins the words with
 * spaces, so a value with spaces must be quoted twice, `"'a b'"`). The vocabulary is the one of
 * `burrow http|tcp|tls` (src/policy/endpoint-flags.ts), plus the options an SSH client cannot
 * give otherwise: `--url`, `--traffic-policy` (the policy's text; SSH sends no files) and
 * `--pooling-enabled`.
 */
import { CODES, ValidationError } from '../../core/errors.js';
import { shorten } from '../../core/quote.js';
import type { EndpointProto } from '../../policy/endpoint-options.js';
import {
  ALL_PROTO_FLAGS,
  FLAG_NAMES,
  REPEATABLE_FLAGS,
  SWITCH_FLAGS,
  type EndpointFlags,
} from '../../policy/endpoint-flags.js';

/** A command, parsed. */
export interface SshCommand {
  proto: EndpointProto;
  /** `--url` (or `--domain`): the name, `https://name`, or for tcp `tcp://host:port`. */
  url?: string | undefined;
  flags: EndpointFlags;
  /** `--traffic-policy`: the policy's text (JSON or YAML). */
  trafficPolicy?: string | undefined;
  /** `--pooling-enabled`: share the URL with other endpoints that pool. */
  pooling: boolean;
}

/** The commands' longest form accepted; longer is refused before parsing. */
export const MAX_COMMAND_BYTES = 64 * 1024;

const PROTOS: readonly EndpointProto[] = ['http', 'tcp', 'tls'];

/** What `help` (or a bad command) prints on the client's terminal. */
export const SSH_USAGE = `Usage: ssh -R 0:localhost:<port> -p <ssh port> <server> <http|tcp|tls> [options]
  --url <name or URL>           the name to serve (also: ssh -R <name>:80:localhost:<port> …)
  --traffic-policy <text>       a traffic policy (JSON or YAML), quoted
  --pooling-enabled             share the URL with other endpoints that pool
  --cidr-allow, --cidr-deny     accept or refuse clients by CIDR (all protocols)
  http only: --basic-auth, --oauth, --oidc, --request-header-add, --response-header-add,
  --compression, --circuit-breaker, --verify-webhook, --host-header rewrite, … as \`burrow http\`
See docs/ssh.md.`;

/** A command that cannot be run: a 400 naming the word or flag. */
export class SshCommandError extends ValidationError {
  constructor(field: string, message: string) {
    super(CODES.invalidValue, field, message);
  }
}

/**
 * Split a command into words as a POSIX shell would: blanks separate, single quotes keep
 * everything, double quotes keep all but `\"` and `\\`, a backslash escapes the next character.
 * @example commandWords(`http --basic-auth 'ops:a b'`) // ['http', '--basic-auth', 'ops:a b']
 */
export function commandWords(command: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < command.length; i++) {
    const c = command[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word = (word ?? '') + c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === '\\' && (command[i + 1] === '"' || command[i + 1] === '\\')) {
        word = (word ?? '') + command[++i]!;
      } else word = (word ?? '') + c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= '';
    } else if (c === '\\' && i + 1 < command.length) {
      word = (word ?? '') + command[++i]!;
    } else if (/\s/.test(c)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (quote) throw new SshCommandError('command', `a ${quote} quote is not closed`);
  if (word !== undefined) words.push(word);
  return words;
}

const KEY_OF_FLAG = new Map(
  Object.entries(FLAG_NAMES).map(([key, flag]) => [flag, key as keyof EndpointFlags]),
);

/**
 * Parse a tunnel command. Throws SshCommandError naming what is wrong; `help` (or nothing) is
 * refused with the usage, which the session prints.
 * @example parseSshCommand('http --basic-auth ops:pw').flags // { basicAuth: ['ops:pw'] }
 */
export function parseSshCommand(command: string): SshCommand {
  if (Buffer.byteLength(command) > MAX_COMMAND_BYTES) {
    throw new SshCommandError('command', `is over ${MAX_COMMAND_BYTES} bytes`);
  }
  const words = commandWords(command);
  const proto = (words[0] ?? '').toLowerCase();
  if (!(PROTOS as readonly string[]).includes(proto)) {
    const given = words[0] === undefined ? 'no command' : `"${shorten(words[0], 40)}"`;
    throw new SshCommandError('command', `${given} is not http, tcp or tls.\n${SSH_USAGE}`);
  }
  const out: SshCommand = { proto: proto as EndpointProto, flags: {}, pooling: false };
  const flags = out.flags as Record<string, string | string[] | boolean | undefined>;
  for (let i = 1; i < words.length; i++) {
    const word = words[i]!;
    const eq = word.indexOf('=');
    const name = word.startsWith('--') && eq > 0 ? word.slice(0, eq) : word;
    const inline = name === word ? undefined : word.slice(eq + 1);
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = words[i + 1];
      if (next === undefined) throw new SshCommandError(name, 'needs a value');
      i++;
      return next;
    };
    if (name === '--url' || name === '--domain') {
      out.url = value();
    } else if (name === '--traffic-policy') {
      out.trafficPolicy = value();
    } else if (name === '--pooling-enabled') {
      out.pooling = inline === undefined || inline === 'true';
    } else {
      const key = KEY_OF_FLAG.get(name);
      if (key === undefined) {
        throw new SshCommandError(name, `is not an option of ssh tunnels.\n${SSH_USAGE}`);
      }
      if (proto !== 'http' && !ALL_PROTO_FLAGS.has(key)) {
        throw new SshCommandError(name, `applies to http tunnels only, not ${proto}`);
      }
      if (SWITCH_FLAGS.has(key)) flags[key] = inline === undefined || inline === 'true';
      else if (REPEATABLE_FLAGS.has(key))
        flags[key] = [...((flags[key] as string[]) ?? []), value()];
      else flags[key] = value();
    }
  }
  return out;
}
