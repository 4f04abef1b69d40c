import { isbot } from 'isbot';
import { LRUCache } from 'lru-cache';
import UAParser from 'ua-parser-js';
import type { RequestInput } from './variables.js';

/**
 * Variables parsed from headers on first use: `req.cookies` (the Cookie header),
 * `req.user_agent` (the User-Agent header, read with ua-parser-js 1.x and isbot) and
 * `req.content_type` / `res.content_type` (the Content-Type header).
 */

/** One cookie of the request: `req.cookies['session'][0].value`. */
export class CookieVars {
  constructor(
    readonly name: string,
    readonly value: string,
  ) {}
}

/** At most this many cookies are read from a request (the rest are not visible to policies). */
const MAX_COOKIES = 256;

/**
 * The cookies of Cookie header values, by name, in the order sent (RFC 6265 `name=value; …`;
 * a pair without `=` is skipped, a quoted value is unquoted).
 * @example parseCookies(['a=1; b=2; a=3']).get('a')?.map((c) => c.value) // ['1', '3']
 */
export function parseCookies(headers: readonly string[]): Map<string, CookieVars[]> {
  const cookies = new Map<string, CookieVars[]>();
  let seen = 0;
  for (const header of headers) {
    for (const pair of header.split(';')) {
      const eq = pair.indexOf('=');
      if (eq < 0) continue;
      const name = pair.slice(0, eq).trim();
      if (name === '') continue;
      if (++seen > MAX_COOKIES) return cookies;
      let value = pair.slice(eq + 1).trim();
      if (value.length >= 2 && value.startsWith('"') && value.endsWith('"'))
        value = value.slice(1, -1);
      const list = cookies.get(name);
      if (list) list.push(new CookieVars(name, value));
      else cookies.set(name, [new CookieVars(name, value)]);
    }
  }
  return cookies;
}

/** What the parser reads of a User-Agent: only the start (bounded work per request). */
const MAX_USER_AGENT = 512;
const parsedAgents = new LRUCache<string, UserAgentVars>({ max: 1024 });

/** Operating systems of desktop computers, as ua-parser-js names them (for `is_desktop`). */
const DESKTOP_OS = new Set([
  'Windows',
  'Mac OS',
  'macOS',
  'Linux',
  'Ubuntu',
  'Debian',
  'Fedora',
  'Chrome OS',
  'Chromium OS',
  'FreeBSD',
  'OpenBSD',
  'NetBSD',
]);

/** The first http(s) URL in a User-Agent, as bots write theirs (`+http://www.google.com/bot.html`). */
const AGENT_URL = /https?:\/\/[^\s;)]+/;

/**
 * `req.user_agent`: the User-Agent header as ngrok's `string` (cel.ts lets it compare with
 * strings), read by ua-parser-js (browser, engine, OS, device, CPU) and isbot (`is_bot`), with
 * ngrok's `is_mobile`, `is_tablet`, `is_desktop` and `url`. Unknown parts are `''`.
 */
export class UserAgentVars {
  readonly raw: string;
  readonly name: string;
  readonly version: string;
  readonly major: string;
  readonly engine_name: string;
  readonly engine_version: string;
  readonly os_name: string;
  readonly os_version: string;
  readonly device_type: string;
  readonly device_vendor: string;
  readonly device_model: string;
  readonly cpu_architecture: string;
  readonly is_bot: boolean;
  readonly is_mobile: boolean;
  readonly is_tablet: boolean;
  /** Neither phone nor tablet nor bot, on a desktop operating system. */
  readonly is_desktop: boolean;
  readonly url: string;
  /** Use {@link UserAgentVars.of}, which caches. */
  constructor(raw: string) {
    const head = raw.slice(0, MAX_USER_AGENT);
    const r = UAParser(head);
    this.raw = raw;
    this.name = r.browser.name ?? '';
    this.version = r.browser.version ?? '';
    this.major = r.browser.major ?? '';
    this.engine_name = r.engine.name ?? '';
    this.engine_version = r.engine.version ?? '';
    this.os_name = r.os.name ?? '';
    this.os_version = r.os.version ?? '';
    this.device_type = r.device.type ?? '';
    this.device_vendor = r.device.vendor ?? '';
    this.device_model = r.device.model ?? '';
    this.cpu_architecture = r.cpu.architecture ?? '';
    this.is_bot = isbot(head);
    this.is_mobile = this.device_type === 'mobile';
    this.is_tablet = this.device_type === 'tablet';
    this.is_desktop = this.device_type === '' && !this.is_bot && DESKTOP_OS.has(this.os_name);
    this.url = AGENT_URL.exec(head)?.[0] ?? '';
  }

  toString(): string {
    return this.raw;
  }

  /** The parsed agent, cached: most requests come from a few agents. */
  static of(raw: string): UserAgentVars {
    // A long agent is parsed each time, so clients cannot fill the cache with large keys.
    if (raw.length > MAX_USER_AGENT) return new UserAgentVars(raw);
    let parsed = parsedAgents.get(raw);
    if (!parsed) parsedAgents.set(raw, (parsed = new UserAgentVars(raw)));
    return parsed;
  }
}

/** `req.ts`: when the edge received the request's head, and its whole body. */
export class RequestTsVars {
  readonly #bodyReceived: () => number | undefined;
  /** `bodyReceived`: when the body was read whole (ms since the epoch), once it was. */
  constructor(
    readonly header_received: Date,
    bodyReceived: () => number | undefined,
  ) {
    this.#bodyReceived = bodyReceived;
  }
  /** The epoch (1970) until the edge read the body whole: unknown times read as 0, as elsewhere. */
  get body_received(): Date {
    return new Date(this.#bodyReceived() ?? 0);
  }
}

/**
 * `req`'s body reader, noting in `req.body_received` when a body with bytes was first read whole
 * (by an action, or for `req.ts.body_received`), for this phase and the response phase alike.
 * @example const read = timedBodyReader(input.req, Date.now); await read?.();
 */
export function timedBodyReader(
  req: RequestInput,
  now: () => number,
): (() => Promise<Buffer>) | undefined {
  const read = req.body;
  if (!read) return undefined;
  return () =>
    read().then((body) => {
      if (body.length > 0) req.body_received ??= now();
      return body;
    });
}

/** At most this many Content-Type parameters are read (real headers carry one or two). */
const MAX_CONTENT_TYPE_PARAMETERS = 16;

/**
 * `req.content_type` / `res.content_type`: the media type, lower case, as ngrok's `string`
 * (cel.ts lets it compare with strings and take the string functions), with the header as sent
 * (`raw`) and its parameters by lower-case name, values unquoted (`parameters['charset']`).
 * Parsing is lenient: a malformed parameter is skipped, not an error, so a policy never fails
 * on a client's typo.
 */
export class ContentTypeVars {
  /** The media type (`application/json`); `''` without the header. Not a CEL field: the value itself. */
  readonly mediaType: string;
  #params: Map<string, string> | undefined;
  constructor(readonly raw: string) {
    this.mediaType = raw.split(';', 1)[0]!.trim().toLowerCase();
  }
  get parameters(): Map<string, string> {
    if (this.#params) return this.#params;
    const params = new Map<string, string>();
    // name=token or name="quoted \"string\"", separated by semicolons (RFC 9110 section 5.6.6).
    const PARAM = /;\s*([^=;\s]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g;
    for (const m of this.raw.matchAll(PARAM)) {
      if (params.size >= MAX_CONTENT_TYPE_PARAMETERS) break;
      const name = m[1]!.toLowerCase();
      const value = m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!.trim();
      if (!params.has(name)) params.set(name, value);
    }
    return (this.#params = params);
  }
  toString(): string {
    return this.mediaType;
  }
}

/** The CEL fields of the types above (cel-types.ts declares them). */
export const USER_AGENT_FIELDS: Record<string, string> = {
  raw: 'string',
  name: 'string',
  version: 'string',
  major: 'string',
  engine_name: 'string',
  engine_version: 'string',
  os_name: 'string',
  os_version: 'string',
  device_type: 'string',
  device_vendor: 'string',
  device_model: 'string',
  cpu_architecture: 'string',
  is_bot: 'bool',
  is_mobile: 'bool',
  is_tablet: 'bool',
  is_desktop: 'bool',
  url: 'string',
};

/** ngrok's names of fields the parser names otherwise (`req.user_agent.os`, `.device`). */
export const USER_AGENT_ALIASES: Record<string, string> = { os: 'os_name', device: 'device_model' };
