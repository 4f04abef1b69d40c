import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import * as http from 'node:http';
import * as https from 'node:https';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { LRUCache } from 'lru-cache';
import { ipInCidr, parseCidr, parseIp, type Cidr, type ParsedIp } from './cidr.js';
import { BurrowError, CODES } from './errors.js';
import { hostnameProblem, normalizeName } from './hostname.js';

/**
 * The egress guard: every outbound HTTP call a traffic policy makes the edge send (JWKS, OpenID
 * discovery, token and userinfo endpoints, provider APIs) goes through it. A policy is written by
 * whoever holds an authtoken, so without it any authtoken could make the edge GET its loopback,
 * its private network or a cloud metadata address. Refused, unless the operator allows them with
 * `--egress-allow <cidr|ip|host>`: loopback, link-local, private (RFC 1918, ULA), shared
 * (CGNAT 100.64/10), unspecified, multicast, reserved and this node's own addresses.
 *
 * The check is made on the address a connection is about to use: names are resolved through a
 * `lookup` hook on the socket (so a name that resolves to a public address when checked and to
 * 127.0.0.1 when connecting, DNS rebinding, is still refused), and an address written in the URL
 * is checked before the request starts (Node does no lookup for it). Redirects are not followed.
 */

/** Blocks refused by default, with the words the operator log uses for them. */
const REFUSED_BLOCKS: ReadonlyArray<readonly [string, string]> = [
  ['0.0.0.0/8', 'unspecified'],
  ['10.0.0.0/8', 'private'],
  ['100.64.0.0/10', 'shared (CGNAT)'],
  ['127.0.0.0/8', 'loopback'],
  ['169.254.0.0/16', 'link-local'],
  ['172.16.0.0/12', 'private'],
  ['192.0.0.0/24', 'IETF protocol'],
  ['192.168.0.0/16', 'private'],
  ['198.18.0.0/15', 'benchmarking'],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved'],
  ['::/128', 'unspecified'],
  ['::1/128', 'loopback'],
  ['::/96', 'IPv4-compatible'],
  ['64:ff9b:1::/48', 'local NAT64'],
  ['fc00::/7', 'unique local'],
  ['fe80::/10', 'link-local'],
  ['fec0::/10', 'site-local'],
  ['ff00::/8', 'multicast'],
];

const REFUSED: ReadonlyArray<readonly [Cidr, string]> = REFUSED_BLOCKS.map(([text, why]) => [
  parseCidr(text) as Cidr,
  why,
]);

/** NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address: that one is checked too. */
const NAT64 = parseCidr('64:ff9b::/96') as Cidr;
const SIX_TO_FOUR = parseCidr('2002::/16') as Cidr;

/** One `--egress-allow` entry: a block (an address is a block of one) or a host name. */
export type EgressAllowEntry = { kind: 'cidr'; cidr: Cidr } | { kind: 'host'; name: string };

/**
 * Parse an `--egress-allow` entry: a CIDR block (`10.0.0.0/8`), an address (`127.0.0.1`, `::1`)
 * or a host name (`idp.internal`). A problem is returned as the rule it breaks.
 * @example parseEgressAllow('127.0.0.1') // { kind: 'cidr', cidr: { family: 4, prefix: 32, … } }
 */
export function parseEgressAllow(text: string): EgressAllowEntry | { problem: string } {
  const entry = text.trim();
  const bare = entry.startsWith('[') && entry.endsWith(']') ? entry.slice(1, -1) : entry;
  const family = isIP(bare);
  if (family !== 0) {
    return { kind: 'cidr', cidr: parseCidr(`${bare}/${family === 4 ? 32 : 128}`) as Cidr };
  }
  if (entry.includes('/')) {
    const cidr = parseCidr(entry);
    if ('problem' in cidr) {
      return {
        problem: `'${entry}' must be a CIDR block with its network address, e.g. 10.0.0.0/8`,
      };
    }
    return { kind: 'cidr', cidr };
  }
  const name = normalizeName(entry);
  // A name of one label (`localhost`, an internal `idp`) is fine here, unlike for endpoints.
  const problem = hostnameProblem(name, false);
  if (problem !== undefined && problem !== 'single-label') {
    return { problem: `'${entry}' must be a CIDR block, an IP address or a host name` };
  }
  return { kind: 'host', name };
}

/**
 * A refused outbound call. The message names the target and why, for the operator's log; a
 * policy shows visitors only that the call failed (the target is the attacker's question).
 */
export class EgressRefusedError extends BurrowError {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly reason: string,
  ) {
    super(
      CODES.egressRefused,
      502,
      `outbound request to ${host}${host === address ? '' : ` (${address})`} refused: ${reason} address; allow it with --egress-allow`,
    );
  }
}

/** What the guard is told by the server at start. */
export interface EgressSettings {
  /** `--egress-allow` entries, already parsed. */
  allow: readonly EgressAllowEntry[];
  /** Addresses of this node beyond its interfaces' (such as `--public-ip`). */
  ownAddresses?: readonly string[];
  /** Told of a refusal, for the operator log (once a minute per host and address). */
  onRefused?: (err: EgressRefusedError) => void;
}

let settings: EgressSettings = { allow: [] };

/** Refusals told to the operator in the last minute (host and address), so each is told once. */
const reported = new LRUCache<string, true>({ max: 1024, ttl: 60_000 });

/**
 * Set the process's egress rules; the server calls it once at start, tests that use local
 * identity providers with `allow: [parseEgressAllow('127.0.0.1')]`. Until then nothing internal
 * is allowed.
 * @example configureEgress({ allow: ['10.1.0.0/16'].map(parseEgressAllow), onRefused: (e) => log.warn(e.message) });
 */
export function configureEgress(next: EgressSettings): void {
  settings = next;
  ownCache = undefined;
  reported.clear();
}

/**
 * How long the node's own addresses are kept: reading the interfaces costs tens of microseconds,
 * and a public address is checked on every outbound connection. An address an interface gains is
 * refused within this time.
 */
const OWN_ADDRESSES_TTL_MS = 1000;
let ownCache: { ips: readonly ParsedIp[]; until: number } | undefined;

function ownAddresses(): readonly ParsedIp[] {
  const now = Date.now();
  if (ownCache && now < ownCache.until) return ownCache.ips;
  const ips = readOwnAddresses();
  ownCache = { ips, until: now + OWN_ADDRESSES_TTL_MS };
  return ips;
}

function readOwnAddresses(): ParsedIp[] {
  const out: ParsedIp[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const nic of list ?? []) {
      const ip = parseIp(nic.address);
      if (ip) out.push(ip);
    }
  }
  for (const text of settings.ownAddresses ?? []) {
    const ip = parseIp(text);
    if (ip) out.push(ip);
  }
  return out;
}

/** Why `ip` may not be reached (the kind of address), or undefined when it may. */
function refusedKind(ip: ParsedIp): string | undefined {
  for (const [block, why] of REFUSED) if (ipInCidr(ip, block)) return why;
  if (ipInCidr(ip, NAT64)) return refusedKind({ family: 4, value: ip.value & 0xffffffffn });
  if (ipInCidr(ip, SIX_TO_FOUR)) {
    return refusedKind({ family: 4, value: (ip.value >> 80n) & 0xffffffffn });
  }
  if (ownAddresses().some((own) => own.family === ip.family && own.value === ip.value)) {
    return "this node's own";
  }
  return undefined;
}

function hostAllowed(host: string): boolean {
  const name = normalizeName(host);
  return settings.allow.some((e) => e.kind === 'host' && e.name === name);
}

/**
 * The refusal for connecting to `address` for `host`, or undefined when allowed: an allowed host
 * name or block wins, then the refused kinds. Reported to the operator when refused.
 * @example egressRefusal('metadata.internal', '169.254.169.254')?.reason // 'link-local'
 */
export function egressRefusal(host: string, address: string): EgressRefusedError | undefined {
  if (hostAllowed(host)) return undefined;
  const ip = parseIp(address);
  if (ip === undefined) return new EgressRefusedError(host, address, 'unparsable');
  if (settings.allow.some((e) => e.kind === 'cidr' && ipInCidr(ip, e.cidr))) return undefined;
  const why = refusedKind(ip);
  if (why === undefined) return undefined;
  const err = new EgressRefusedError(host, address, why);
  // Once a minute per target: a policy's every request would otherwise write a line.
  const target = `${host}\n${address}`;
  if (!reported.has(target)) {
    reported.set(target, true);
    settings.onRefused?.(err);
  }
  return err;
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for sockets: resolves like dns.lookup, then keeps only addresses the guard allows;
 * none left is an {@link EgressRefusedError} (the socket emits it and never connects).
 */
export function guardedLookup(
  host: string,
  options: LookupOptions,
  callback: LookupCallback,
): void {
  dnsLookup(host, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, options.all ? [] : '');
    let refusal: EgressRefusedError | undefined;
    const allowed = addresses.filter((a) => {
      const r = egressRefusal(host, a.address);
      refusal ??= r;
      return r === undefined;
    });
    if (allowed.length === 0) {
      return callback(refusal ?? new EgressRefusedError(host, host, 'unresolvable'), '');
    }
    if (options.all) return callback(null, allowed);
    callback(null, allowed[0]!.address, allowed[0]!.family);
  });
}

/** Refuse `url` up front when its host is an address the guard refuses (no lookup for those). */
export function checkEgressUrl(url: URL): void {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (isIP(host) === 0) return;
  const refusal = egressRefusal(host, host);
  if (refusal) throw refusal;
}

/** Agents whose sockets resolve through {@link guardedLookup} (for libraries that take one). */
const AGENTS = {
  'http:': new http.Agent({ keepAlive: false, lookup: guardedLookup }),
  'https:': new https.Agent({ keepAlive: false, lookup: guardedLookup }),
};

/**
 * The guarded agent for `protocol` (`http:` or `https:`): pass it where a library makes its own
 * requests, after {@link checkEgressUrl}.
 * @example createRemoteJWKSet(url, { agent: egressAgent(url.protocol) })
 */
export function egressAgent(protocol: string): http.Agent {
  if (protocol === 'https:') return AGENTS['https:'];
  if (protocol === 'http:') return AGENTS['http:'];
  throw new TypeError(`an outbound request must be http or https, not ${protocol}`);
}

/** The most an answer's body may hold: discovery documents and key sets are a few kilobytes. */
export const EGRESS_MAX_BODY = 1024 * 1024;

/** What {@link egressFetch} takes: fetch's options as openid-client and Burrow use them. */
export interface EgressRequest {
  method?: string;
  headers?: Headers | Record<string, string> | Array<[string, string]>;
  /** A stream is refused: nothing Burrow sends needs one. */
  body?: string | URLSearchParams | Uint8Array | ArrayBuffer | ReadableStream | null | undefined;
  signal?: AbortSignal | null | undefined;
  /** Redirects are never followed: a 3xx is the answer. */
  redirect?: string;
}

function bodyBytes(body: EgressRequest['body']): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof URLSearchParams) return Buffer.from(body.toString());
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (body instanceof ReadableStream)
    throw new TypeError('an outbound request body cannot be a stream');
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

/**
 * fetch through the guard: the URL's address checked, names resolved by {@link guardedLookup},
 * no redirect followed, the body at most {@link EGRESS_MAX_BODY}. Shaped like fetch so that
 * openid-client can take it as its `customFetch`.
 * @example const res = await egressFetch('https://id.example/.well-known/openid-configuration', { signal: AbortSignal.timeout(5000) });
 */
export async function egressFetch(
  input: string | URL,
  init: EgressRequest = {},
): Promise<Response> {
  const url = new URL(input);
  const agent = egressAgent(url.protocol);
  checkEgressUrl(url);
  const headers = new Headers(init.headers);
  const body = bodyBytes(init.body);
  if (body !== undefined && !headers.has('content-type') && init.body instanceof URLSearchParams) {
    headers.set('content-type', 'application/x-www-form-urlencoded;charset=UTF-8');
  }
  if (body !== undefined) headers.set('content-length', String(body.length));
  const request = (url.protocol === 'https:' ? https : http).request;
  return new Promise<Response>((resolve, reject) => {
    const req = request(url, {
      method: init.method ?? 'GET',
      headers: Object.fromEntries(headers),
      agent,
      ...(init.signal ? { signal: init.signal } : {}),
    });
    req.once('error', reject);
    req.once('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > EGRESS_MAX_BODY) {
          req.destroy(new Error(`the answer of ${url.origin} is over ${EGRESS_MAX_BODY} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.once('error', reject);
      res.once('end', () => {
        const out = new Headers();
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) {
          try {
            out.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          } catch {
            // A header fetch would refuse too (an invalid value): dropped.
          }
        }
        const status = res.statusCode ?? 502;
        const noBody = status === 204 || status === 304 || status < 200;
        resolve(
          new Response(noBody ? null : Buffer.concat(chunks), {
            status: status < 200 ? 502 : status,
            statusText: res.statusMessage ?? '',
            headers: out,
          }),
        );
      });
    });
    req.end(body);
  });
}
