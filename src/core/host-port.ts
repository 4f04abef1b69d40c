/**
 * The one parser and formatter of `host:port` text: listen addresses, TCP addresses, hostports of
 * edges, static backends, Host headers. IPv6 hosts are written in brackets (`[::1]:443`), as in
 * URLs; everything else is a name or an IPv4 address without a colon.
 *
 * @example
 * parseHostPort('[::1]:8080')                          // { host: '::1', port: 8080 }
 * formatHostPort('::1', 8080)                          // '[::1]:8080'
 * parseHostPort('example.com', { port: 'optional' })   // { host: 'example.com', port: undefined }
 */

/** A parsed `host:port`. */
export interface HostPort {
  /** The host, without brackets unless `keepBrackets` was asked for. */
  host: string;
  port: number;
}

/** A parsed `host[:port]`, when the port may be absent. */
export interface HostMaybePort {
  host: string;
  port: number | undefined;
}

/** How strict parseHostPort is. */
export interface HostPortOptions {
  /** `'required'` (the default): the text must end in `:port`; `'optional'`: a host alone is fine. */
  port?: 'required' | 'optional';
  /** The lowest port accepted: 0 (the default, "pick a free port" for listen addresses) or 1. */
  minPort?: number;
  /** Return an IPv6 host as written, `[::1]`, instead of `::1` (for values stored that way). */
  keepBrackets?: boolean;
  /** Accept an empty host (`:8080`), meaning every interface; returned as `''`. */
  allowEmptyHost?: boolean;
}

// `[v6]` (hex digits, colons, dots) or a host with no colon or bracket; then an optional `:digits`.
const HOST_PORT_RE = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*))(?::(\d+))?$/;

/** The host (brackets as asked) and port digits of `text`, shape checked, the port's value not. */
function matchHostPort(
  text: string,
  options: HostPortOptions,
): { host: string; port: string | undefined } | undefined {
  const m = HOST_PORT_RE.exec(text);
  if (!m) return undefined;
  const [, v6, name, port] = m;
  const host = v6 === undefined ? name! : options.keepBrackets ? `[${v6}]` : v6;
  if (host === '' && !options.allowEmptyHost) return undefined;
  return { host, port };
}

/**
 * The port a URL scheme implies when it names none.
 * @example DEFAULT_PORTS['https'] // 443
 */
export const DEFAULT_PORTS: Readonly<Record<string, number>> = { http: 80, https: 443, tls: 443 };

/**
 * Split `host:port` (IPv6 in brackets). Returns undefined when the text is not one: a bare IPv6
 * address, a port out of 0..65535 (or below `minPort`), a missing port when it is required, or an
 * empty host unless `allowEmptyHost`. The host is returned as written (no case change).
 *
 * Like Go's net.SplitHostPort this checks the shape only: whether the host is a valid DNS name or
 * IP address is the caller's rule (hostnameProblem in ./hostname.ts, isIP from node:net), so each
 * caller can say what is wrong with it.
 *
 * @example parseHostPort('tcp.example.com:20001')  // { host: 'tcp.example.com', port: 20001 }
 * @example parseHostPort('[::1]:443')              // { host: '::1', port: 443 }
 * @example parseHostPort('[::1]:443', { keepBrackets: true }) // { host: '[::1]', port: 443 }
 * @example parseHostPort('example.com:0', { minPort: 1 })     // undefined
 * @example parseHostPort('::1:443')                // undefined (IPv6 needs brackets)
 */
export function parseHostPort(
  text: string,
  options?: HostPortOptions & { port?: 'required' },
): HostPort | undefined;
export function parseHostPort(
  text: string,
  options: HostPortOptions & { port: 'optional' },
): HostMaybePort | undefined;
export function parseHostPort(
  text: string,
  options: HostPortOptions = {},
): HostMaybePort | undefined {
  const m = matchHostPort(text, options);
  if (!m) return undefined;
  const { host, port: portText } = m;
  if (portText === undefined) {
    return options.port === 'optional' ? { host, port: undefined } : undefined;
  }
  const port = Number(portText);
  if (portText.length > 5 || port < (options.minPort ?? 0) || port > 65535) return undefined;
  return { host, port };
}

const NO_OPTIONS: HostPortOptions = Object.freeze({});

/**
 * Split `host:port` by shape only, the port as its digits, whatever their value: for telling a
 * port out of range from text that is no `host:port` at all, after parseHostPort refused it.
 * Undefined when the port is missing or not digits, or as parseHostPort for the host.
 *
 * @example splitHostPort('example.com:99999')  // { host: 'example.com', port: '99999' }
 * @example splitHostPort('[::1]:0')            // { host: '::1', port: '0' }
 * @example splitHostPort('example.com:http')   // undefined
 */
export function splitHostPort(text: string): { host: string; port: string } | undefined {
  const m = matchHostPort(text, NO_OPTIONS);
  return m?.port === undefined ? undefined : { host: m.host, port: m.port };
}

/**
 * `host:port`, with an IPv6 host in brackets (a host already in brackets is kept as is). Without
 * a port, the host alone (still bracketed when IPv6), as a Host header or URL authority wants it.
 *
 * @example formatHostPort('example.com', 443) // 'example.com:443'
 * @example formatHostPort('::1', 4443)        // '[::1]:4443'
 * @example formatHostPort('::1')              // '[::1]'
 */
export function formatHostPort(host: string, port?: number | string): string {
  const shown = host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return port === undefined ? shown : `${shown}:${port}`;
}

/**
 * The host of a `host[:port]` text such as a Host header, without brackets; the text itself
 * when it does not parse (so callers can still report it).
 *
 * @example hostOfHostPort('App.example.com:8080') // 'App.example.com'
 * @example hostOfHostPort('[::1]:80')             // '::1'
 */
export function hostOfHostPort(text: string): string {
  return parseHostPort(text, { port: 'optional', allowEmptyHost: true })?.host ?? text;
}

/**
 * The host of a Host header (or any `host[:port]`) without checking it, for the per-request path
 * where parseHostPort's regular expression would cost: an IPv6 literal with its brackets
 * (`[::1]`), else the text before the first colon; '' when a `[` is never closed. Case is kept.
 * Use parseHostPort (or hostOfHostPort) where the text must be valid.
 *
 * @example hostOf('App.example.com:8080') // 'App.example.com'
 * @example hostOf('[::1]:443')            // '[::1]'
 * @example hostOf('[::1')                 // ''
 */
export function hostOf(text: string): string {
  if (text.charCodeAt(0) === 0x5b /* [ */) {
    const end = text.indexOf(']');
    return end < 0 ? '' : text.slice(0, end + 1);
  }
  const colon = text.indexOf(':');
  return colon < 0 ? text : text.slice(0, colon);
}

/**
 * Parse a listen address `host:port` (IPv6 in brackets; port 0 picks a free one).
 * @example parseListenAddress('127.0.0.1:8080') // { host: '127.0.0.1', port: 8080 }
 */
export function parseListenAddress(value: string): { host: string; port: number } {
  const parsed = parseHostPort(value, { allowEmptyHost: true });
  if (!parsed) throw new TypeError(`"${value}" is not a host:port listen address`);
  return parsed;
}

/**
 * `host:port` of a listening server, for URLs and logs.
 * @example formatAddress({ address: '::1', port: 8080 }) // '[::1]:8080'
 */
export function formatAddress(address: { address: string; port: number }): string {
  return formatHostPort(address.address, address.port);
}
