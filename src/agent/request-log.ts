/**
 * The requests through this agent, as the local inspector and `/api/requests/http` show them:
 * each captured exchange (the first bytes of request and response, SDK `endpoint.capture()`)
 * in ngrok's agent API shape, newest first, within a byte budget (`inspect_db_size`); and each
 * tunnel's metrics (counts, rates, duration percentiles) as `/api/tunnels` shows them.
 */
import { randomBytes } from 'node:crypto';
import type { HttpExchange } from '../sdk/http-observer.js';

/** Bytes of each request and response kept (head and body); more is cut and says so. */
export const CAPTURE_BYTES = 64 * 1024;
/** The default budget of the log (ngrok's `inspect_db_size` default is 50 MB; an agent on a laptop keeps less). */
export const DEFAULT_LOG_BYTES = 16 * 1024 * 1024;

/** One side of a captured exchange, as ngrok's agent API shows it. */
export interface CapturedSide {
  proto: string;
  headers: Record<string, string[]>;
  /** The captured bytes (head and body), base64. */
  raw: string;
  /** Bytes the message had on the wire; more than the captured bytes when it was cut. */
  size: number;
  truncated: boolean;
}

/** One request as `GET /api/requests/http/{id}` shows it. */
export interface CapturedRequest {
  uri: string;
  id: string;
  tunnel_name: string;
  remote_addr: string;
  /** RFC 3339. */
  start: string;
  /** Nanoseconds, as ngrok's API gives it. */
  duration: number;
  request: CapturedSide & { method: string; uri: string };
  response: (CapturedSide & { status: string; status_code: number }) | null;
  /** When this is a replay, the id of the request replayed. */
  replay_of?: string;
}

/** Split a captured message into its head lines and its body. */
export function splitMessage(raw: Buffer): {
  startLine: string;
  headers: Record<string, string[]>;
  body: Buffer;
} {
  const end = raw.indexOf('\r\n\r\n');
  const headText = raw.toString('latin1', 0, end < 0 ? raw.length : end);
  const [startLine = '', ...lines] = headText.split('\r\n');
  const headers: Record<string, string[]> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    // Canonical case (content-type → Content-Type), as ngrok's Go agent shows header names.
    const name = line
      .slice(0, colon)
      .trim()
      .toLowerCase()
      .replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
    (headers[name] ??= []).push(line.slice(colon + 1).trim());
  }
  return { startLine, headers, body: end < 0 ? Buffer.alloc(0) : raw.subarray(end + 4) };
}

function side(raw: Buffer, size: number): { side: CapturedSide; startLine: string } {
  const { startLine, headers } = splitMessage(raw);
  const proto = /HTTP\/\d\.\d/.exec(startLine)?.[0] ?? 'HTTP/1.1';
  return {
    startLine,
    side: { proto, headers, raw: raw.toString('base64'), size, truncated: raw.length < size },
  };
}

/** Per-tunnel metrics in ngrok's shape: `conns` and `http`, each count, gauge, rates, percentiles. */
export interface MeterView {
  count: number;
  gauge: number;
  rate1: number;
  rate5: number;
  rate15: number;
  /** Durations in nanoseconds, as ngrok's API gives them. */
  p50: number;
  p90: number;
  p95: number;
  p99: number;
}

const WINDOW_MS = 15 * 60_000;
const MAX_SAMPLES = 10_000;

/** Counts events and their durations over the last 15 minutes (at most 10 000 kept). */
export class Meter {
  count = 0;
  gauge = 0;
  private readonly samples: Array<{ at: number; durationMs: number }> = [];

  record(durationMs: number, at = Date.now()): void {
    this.count++;
    this.samples.push({ at, durationMs });
    if (this.samples.length > MAX_SAMPLES) this.samples.shift();
  }

  view(now = Date.now()): MeterView {
    while (this.samples.length > 0 && this.samples[0]!.at < now - WINDOW_MS) this.samples.shift();
    const within = (ms: number): number => this.samples.filter((s) => s.at >= now - ms).length;
    const sorted = this.samples.map((s) => s.durationMs).sort((a, b) => a - b);
    const pct = (p: number): number =>
      sorted.length === 0
        ? 0
        : Math.round(
            sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! * 1e6,
          );
    return {
      count: this.count,
      gauge: this.gauge,
      rate1: within(60_000) / 60,
      rate5: within(300_000) / 300,
      rate15: within(WINDOW_MS) / 900,
      p50: pct(50),
      p90: pct(90),
      p95: pct(95),
      p99: pct(99),
    };
  }
}

/** The captured requests of every tunnel of one agent. */
export class RequestLog {
  private readonly entries: Array<{ request: CapturedRequest; bytes: number }> = [];
  private bytes = 0;
  private readonly listeners = new Set<(request: CapturedRequest) => void>();

  constructor(private readonly maxBytes = DEFAULT_LOG_BYTES) {}

  /**
   * Record an exchange of `tunnelName` (one with its captured bytes) and return it as the API shows it.
   * @example log.add('command_line', exchange)
   */
  add(tunnelName: string, exchange: HttpExchange, replayOf?: string): CapturedRequest | undefined {
    if (!exchange.request) return undefined;
    const id = randomBytes(8).toString('hex');
    const requestSide = side(exchange.request.raw, exchange.request.size);
    const responseSide = exchange.response && side(exchange.response.raw, exchange.response.size);
    const statusText = responseSide?.startLine.split(' ').slice(1).join(' ') ?? '';
    const request: CapturedRequest = {
      uri: `/api/requests/http/${id}`,
      id,
      tunnel_name: tunnelName,
      remote_addr: exchange.clientAddr.replace(/:\d+$/, '').replace(/^\[|\]$/g, ''),
      start: new Date(Date.now() - exchange.durationMs).toISOString(),
      duration: Math.round(exchange.durationMs * 1e6),
      request: { ...requestSide.side, method: exchange.method, uri: exchange.path },
      response: responseSide
        ? { ...responseSide.side, status: statusText, status_code: exchange.status }
        : null,
      ...(replayOf !== undefined && { replay_of: replayOf }),
    };
    const bytes = exchange.request.raw.length + (exchange.response?.raw.length ?? 0) + 512;
    this.entries.unshift({ request, bytes });
    this.bytes += bytes;
    while (this.bytes > this.maxBytes && this.entries.length > 1)
      this.bytes -= this.entries.pop()!.bytes;
    for (const listener of this.listeners) listener(request);
    return request;
  }

  /** Newest first, at most `limit`, of one tunnel when `tunnelName` is given. */
  list(limit: number | undefined, tunnelName: string | undefined): CapturedRequest[] {
    const found: CapturedRequest[] = [];
    for (const { request } of this.entries) {
      if (limit !== undefined && found.length >= limit) break;
      if (tunnelName === undefined || request.tunnel_name === tunnelName) found.push(request);
    }
    return found;
  }

  get(id: string): CapturedRequest | undefined {
    return this.entries.find((e) => e.request.id === id)?.request;
  }

  clear(): void {
    this.entries.length = 0;
    this.bytes = 0;
  }

  /** Call `listener` with each request as it is recorded; returns the function that stops it. */
  subscribe(listener: (request: CapturedRequest) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
