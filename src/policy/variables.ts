import type { X509Certificate } from 'node:crypto';
import {
  canonicalHeaderName,
  caseInsensitiveLookups,
  firstHeader,
  headerMap,
  headerValues,
  NO_HEADER_CHANGES,
  type HeaderChanges,
  type HeaderInput,
  type MessageHeaders,
} from './headers.js';
import {
  ContentTypeVars,
  parseCookies,
  RequestTsVars,
  UserAgentVars,
  type CookieVars,
} from './request-detail-vars.js';
import type { SecretsVars } from './secrets.js';
import { GeoVars, IpInfoVars, type GeoInput } from './ip-intel-vars.js';

export type { GeoInput } from './ip-intel-vars.js';
import { TlsClientVars } from './tls-client-vars.js';
import { UrlVars } from './url-vars.js';
import { parseSetCookies, type ResponseCookieVars } from './response-cookie-vars.js';

export { UrlVars } from './url-vars.js';

/**
 * The variables expressions see (`conn`, `req`, `res`, `endpoint`, `time`), built from the plain
 * objects the ingress passes. Each is a small class whose getters compute a field on first use,
 * so a request pays only for what its policy reads; each snake_case field also answers to its
 * older PascalCase name (`conn.ClientIP`, `conn.TLS.Version`, `req.URL`, `res.StatusCode`).
 * CEL integers are bigints; unknown strings are empty, unknown numbers 0.
 */

/** TLS facts of a connection; empty strings on plain TCP/HTTP. */
export interface TlsInput {
  /** `1.3`, or Node's `TLSv1.3` (normalised to `1.3`). */
  version?: string | undefined;
  cipher_suite?: string | undefined;
  sni?: string | undefined;
  negotiated_alpn?: string | undefined;
  session_resumed?: boolean | undefined;
  /** The client's certificate, when TLS ended at the edge (terminate-tls) and the client sent one. */
  client?: X509Certificate | undefined;
}

/** The client connection (every phase). */
export interface ConnInput {
  client_ip: string;
  client_port?: number | undefined;
  server_ip?: string | undefined;
  server_port?: number | undefined;
  server_region?: string | undefined;
  bytes_in?: number | undefined;
  bytes_out?: number | undefined;
  ts?: { start?: Date | number | undefined } | undefined;
  tls?: TlsInput | undefined;
  geo?: GeoInput | undefined;
}

/** The endpoint the traffic arrived on. */
export interface EndpointInput {
  id?: string | undefined;
  url?: string | undefined;
  host?: string | undefined;
  port?: number | undefined;
  protocol?: string | undefined;
  addr?: string | undefined;
}

/** An HTTP request as received. */
export interface RequestInput {
  method: string;
  /** The request target as received: path and query (`/a/b?c=1`). */
  url: string;
  /** `http` or `https`; default `http`. */
  scheme?: string | undefined;
  headers: MessageHeaders;
  /** The Host header value; defaults to `headers.host`. */
  host?: string | undefined;
  /** The HTTP version, e.g. `1.1`. */
  version?: string | undefined;
  /** When the edge read the request's head (ms since the epoch); default: when a rule reads it. */
  received?: number | undefined;
  /**
   * Reads the whole body (once); given by the ingress so that actions that need the body
   * (verify-webhook) can have it. Without it those actions refuse the request.
   */
  body?: (() => Promise<Buffer>) | undefined;
  /** Set by the engine when it read the body whole (ms since the epoch): `req.ts.body_received`. */
  body_received?: number | undefined;
  /** The trailers that followed the body; read once the body was read whole (`req.trailers`). */
  trailers?: (() => HeaderInput) | undefined;
}

/** An HTTP response from the upstream service. */
export interface ResponseInput {
  status_code: number;
  headers: MessageHeaders;
}

const big = (n: number | undefined): bigint => BigInt(Math.trunc(n ?? 0));

/** The key of the header maps: one function, so that their lookups are made once (headers.ts). */
const lowerCase = (name: string): string => name.toLowerCase();

/**
 * `TLSv1.3` → `1.3`, `TLSv1` → `1.0`; other text unchanged; undefined → ''.
 * @example normalizeTlsVersion('TLSv1.2') // '1.2'
 */
export function normalizeTlsVersion(version: string | undefined): string {
  if (!version) return '';
  const m = /^TLSv?(\d)(?:\.(\d))?$/i.exec(version);
  return m ? `${m[1]}.${m[2] ?? '0'}` : version;
}

export class TlsVars {
  readonly #in: TlsInput;
  #client: TlsClientVars | undefined;
  constructor(input: TlsInput | undefined) {
    this.#in = input ?? {};
  }
  get version(): string {
    return normalizeTlsVersion(this.#in.version);
  }
  get cipher_suite(): string {
    return this.#in.cipher_suite ?? '';
  }
  get sni(): string {
    return this.#in.sni ?? '';
  }
  get negotiated_alpn(): string {
    return this.#in.negotiated_alpn ?? '';
  }
  get session_resumed(): boolean {
    return this.#in.session_resumed ?? false;
  }
  get client(): TlsClientVars {
    return (this.#client ??= new TlsClientVars(this.#in.client));
  }
}

export class ConnTsVars {
  constructor(readonly start: Date) {}
}

export class ConnVars {
  readonly #in: ConnInput;
  #tlsIn: TlsInput | undefined;
  #tls: TlsVars | undefined;
  #geo: GeoVars | undefined;
  #ts: ConnTsVars | undefined;
  #info: IpInfoVars | undefined;
  constructor(input: ConnInput) {
    this.#in = input;
    this.#tlsIn = input.tls;
  }
  get client_ip(): string {
    return this.#in.client_ip;
  }
  get client_port(): bigint {
    return big(this.#in.client_port);
  }
  get server_ip(): string {
    return this.#in.server_ip ?? '';
  }
  get server_port(): bigint {
    return big(this.#in.server_port);
  }
  get server_region(): string {
    return this.#in.server_region ?? '';
  }
  get bytes_in(): bigint {
    return big(this.#in.bytes_in);
  }
  get bytes_out(): bigint {
    return big(this.#in.bytes_out);
  }
  get ts(): ConnTsVars {
    const start = this.#in.ts?.start;
    return (this.#ts ??= new ConnTsVars(start === undefined ? new Date() : new Date(start)));
  }
  get tls(): TlsVars {
    return (this.#tls ??= new TlsVars(this.#tlsIn));
  }
  /** Called once terminate-tls finished the handshake, so later rules see the negotiated TLS. */
  setTls(tls: TlsInput): void {
    this.#tlsIn = tls;
    this.#tls = undefined;
  }
  get geo(): GeoVars {
    return (this.#geo ??= new GeoVars(this.#in.geo, () => this.client_ip_info));
  }
  /** `conn.client_ip.geo…`, `.as…`, `.categories`, `.is_on_blocklist` (cel.ts routes them here). */
  get client_ip_info(): IpInfoVars {
    return (this.#info ??= IpInfoVars.of(this.#in.client_ip));
  }
}

export class EndpointVars {
  readonly #in: EndpointInput;
  constructor(input: EndpointInput | undefined) {
    this.#in = input ?? {};
  }
  get id(): string {
    return this.#in.id ?? '';
  }
  get url(): string {
    return this.#in.url ?? '';
  }
  get host(): string {
    return this.#in.host ?? '';
  }
  get port(): bigint {
    return big(this.#in.port);
  }
  get protocol(): string {
    return this.#in.protocol ?? '';
  }
  get addr(): string {
    return this.#in.addr ?? '';
  }
}

/** Shared by `req` and `res`: the header map, rebuilt after the phase edits headers. */
abstract class MessageVars {
  readonly #headers: MessageHeaders;
  #changes: HeaderChanges = NO_HEADER_CHANGES;
  #map: Map<string, string[]> | undefined;
  #canonical: Map<string, string[]> | undefined;
  #contentType: ContentTypeVars | undefined;
  constructor(headers: MessageHeaders) {
    this.#headers = headers;
  }
  get headers(): Map<string, string[]> {
    return (this.#map ??= caseInsensitiveLookups(
      headerMap(this.#headers, this.#changes),
      lowerCase,
    ));
  }
  /** The older `Headers` map: the same values under Go's canonical names (`User-Agent`). */
  get Headers(): Map<string, string[]> {
    if (this.#canonical) return this.#canonical;
    const map = new Map<string, string[]>();
    for (const [k, v] of this.headers) map.set(canonicalHeaderName(k), v);
    return (this.#canonical = caseInsensitiveLookups(map, canonicalHeaderName));
  }
  /** The values of header `name` (any case); empty when absent. Avoids building the whole map. */
  header(name: string): string[] {
    const lower = name.toLowerCase();
    if (this.#map) return this.#map.get(lower) ?? [];
    const changes = this.#changes;
    const values = changes.remove.includes(lower) ? [] : headerValues(this.#headers, lower);
    for (const [n, v] of changes.add) if (n === lower) values.push(v);
    return values;
  }
  protected first(name: string): string | undefined {
    if (this.#changes === NO_HEADER_CHANGES) return firstHeader(this.#headers, name);
    return this.headers.get(name)?.[0];
  }
  get content_length(): bigint {
    const n = Number(this.first('content-length') ?? 0);
    return Number.isSafeInteger(n) && n >= 0 ? BigInt(n) : 0n;
  }
  get content_type(): ContentTypeVars {
    return (this.#contentType ??= new ContentTypeVars(this.first('content-type') ?? ''));
  }
  get location(): string {
    return this.first('location') ?? '';
  }
  /** Called by the runner after an action edited this message's headers. */
  setHeaderChanges(changes: HeaderChanges): void {
    this.#changes = changes;
    this.#map = undefined;
    this.#canonical = undefined;
    this.#contentType = undefined;
  }
}

export class ReqVars extends MessageVars {
  readonly #in: RequestInput;
  #target: string;
  #url: UrlVars | undefined;
  #cookies: Map<string, CookieVars[]> | undefined;
  #userAgent: UserAgentVars | undefined;
  #ts: RequestTsVars | undefined;
  constructor(input: RequestInput) {
    super(input.headers);
    this.#in = input;
    this.#target = input.url;
  }
  /** The Cookie header's cookies by name (`req.cookies['session'][0].value`). */
  get cookies(): Map<string, CookieVars[]> {
    return (this.#cookies ??= parseCookies(this.header('cookie')));
  }
  get user_agent(): UserAgentVars {
    return (this.#userAgent ??= UserAgentVars.of(this.first('user-agent') ?? ''));
  }
  /**
   * The trailers (lower-case names, looked up in any case), known once the body was read whole:
   * empty before. Not cached, since the body may be read after a first look.
   */
  get trailers(): Map<string, string[]> {
    const trailers = this.#in.trailers?.() ?? {};
    return caseInsensitiveLookups(headerMap(trailers), lowerCase);
  }
  /** Cookies and the agent are read from the headers: after an edit, read again. */
  override setHeaderChanges(changes: HeaderChanges): void {
    super.setHeaderChanges(changes);
    this.#cookies = undefined;
    this.#userAgent = undefined;
  }
  get ts(): RequestTsVars {
    const input = this.#in;
    return (this.#ts ??= new RequestTsVars(
      new Date(input.received ?? Date.now()),
      () => input.body_received,
    ));
  }
  get method(): string {
    return this.#in.method.toUpperCase();
  }
  get host(): string {
    return this.#in.host ?? firstHeader(this.#in.headers, 'host') ?? '';
  }
  get url(): UrlVars {
    return (this.#url ??= new UrlVars(this.#in.scheme ?? 'http', this.host, this.#target));
  }
  get version(): string {
    return this.#in.version ?? '1.1';
  }
  get content_encoding(): string[] {
    const raw = this.first('content-encoding');
    return raw ? raw.split(',').map((s) => s.trim().toLowerCase()) : [];
  }
  /** The request target after url-rewrite (path and query). */
  get target(): string {
    return this.#target;
  }
  /** Called by url-rewrite, so later rules see the new URL. */
  setTarget(target: string): void {
    this.#target = target;
    this.#url = undefined;
  }
}

export class ResVars extends MessageVars {
  readonly #in: ResponseInput;
  #cookies: Map<string, ResponseCookieVars[]> | undefined;
  constructor(input: ResponseInput) {
    super(input.headers);
    this.#in = input;
  }
  /** The Set-Cookie headers' cookies by name (`res.cookies['session'][0].http_only`). */
  get cookies(): Map<string, ResponseCookieVars[]> {
    return (this.#cookies ??= parseSetCookies(this.header('set-cookie')));
  }
  /** Cookies are read from the headers: after an edit, read again. */
  override setHeaderChanges(changes: HeaderChanges): void {
    super.setHeaderChanges(changes);
    this.#cookies = undefined;
  }
  get status_code(): bigint {
    return BigInt(this.#in.status_code);
  }
}

export class TimeVars {
  readonly #clock: () => number;
  #now: Date | undefined;
  constructor(clock: () => number) {
    this.#clock = clock;
  }
  get now(): Date {
    return (this.#now ??= new Date(this.#clock()));
  }
}

/** What one evaluation sees: the CEL root variables. */
export interface Activation {
  conn: ConnVars;
  endpoint: EndpointVars;
  time: TimeVars;
  vars: Record<string, unknown>;
  /** Results of earlier actions: `actions.ngrok.jwt_validation`, … */
  actions?: Record<string, unknown>;
  req?: ReqVars;
  res?: ResVars;
  /** `secrets.get('vault', 'name')`; the runner always sets it. */
  secrets?: SecretsVars;
}
