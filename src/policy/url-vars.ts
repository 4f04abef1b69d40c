import { parseHostPort } from '../core/host-port.js';

/** `req.url` (the request's URL and its parts), split from variables.ts for size. */

/** A Host header: `host[:port]`, an IPv6 host kept in brackets as the policy variables show it. */
const HOST_HEADER = { port: 'optional', keepBrackets: true, allowEmptyHost: true } as const;

function decodePath(raw: string): string {
  if (!raw.includes('%')) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * `req.url`: the full URL, comparable with strings (`req.url == 'https://a/b'`,
 * `req.url.contains('/admin')`), with its parts as fields.
 */
export class UrlVars {
  readonly scheme: string;
  readonly host: string;
  readonly port: bigint;
  readonly raw_path: string;
  readonly query: string;
  readonly raw: string;
  /** `scheme://host[:port]`, the part of `raw` before the path. */
  readonly origin: string;
  /** `host[:port]` as the request named it (the Host header). */
  readonly authority: string;
  #params: Map<string, string[]> | undefined;
  #path: string | undefined;
  constructor(scheme: string, hostHeader: string, target: string) {
    this.scheme = scheme;
    const q = target.indexOf('?');
    this.raw_path = q < 0 ? target : target.slice(0, q);
    this.query = q < 0 ? '' : target.slice(q + 1);
    const hp = parseHostPort(hostHeader, HOST_HEADER);
    this.host = (hp?.host ?? hostHeader).toLowerCase();
    this.port = hp?.port !== undefined ? BigInt(hp.port) : scheme === 'https' ? 443n : 80n;
    this.authority = hostHeader;
    this.origin = `${scheme}://${hostHeader}`;
    this.raw = this.origin + target;
  }
  get path(): string {
    return (this.#path ??= decodePath(this.raw_path));
  }
  get query_params(): Map<string, string[]> {
    if (this.#params) return this.#params;
    const params = new Map<string, string[]>();
    let seen = 0;
    for (const [k, v] of new URLSearchParams(this.query)) {
      // Policies see a bounded query: lists feed comprehensions, and a request with thousands of
      // repeated parameters must not make every rule iterate thousands of times squared.
      if (++seen > QUERY_LIMITS.maxParams) break;
      const list = params.get(k);
      if (!list) params.set(k, [v]);
      else if (list.length < QUERY_LIMITS.maxValuesPerName) list.push(v);
    }
    return (this.#params = params);
  }
  /** The path and query as the request named them (ngrok's `req.url.uri`). */
  get uri(): string {
    return this.raw.slice(this.origin.length);
  }
  /**
   * ngrok's `user:password` part: always `''`, since the edge refuses a request target carrying
   * userinfo (core/request-target.ts) and a Host header cannot carry it.
   */
  get user_password(): string {
    return '';
  }
  toString(): string {
    return this.raw;
  }
}

/** How much of a query string policies see (documented in docs/traffic-policy.md). */
const QUERY_LIMITS = { maxParams: 256, maxValuesPerName: 32 } as const;
