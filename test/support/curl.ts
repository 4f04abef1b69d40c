import { execFile } from 'node:child_process';

/** What curl got back. */
export interface CurlReply {
  status: number;
  /** The body as text ('' for none). */
  text: string;
  /** The body parsed as JSON, undefined when it is empty or not JSON. */
  // Replies are JSON of many shapes; tests narrow them by assertion.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  /** Response headers, names in lower case. */
  headers: Record<string, string>;
  /** The HTTP version of the status line: `1.1`, `2`. */
  httpVersion: string;
}

/**
 * Run the real curl binary with `args` (as on a command line, without `curl`), adding
 * `-s -D - -w '\n%{http_code}'` to collect the status and headers.
 * @example const { status, body } = await curl(['http://127.0.0.1:4000/healthz']);
 */
export async function curl(args: string[]): Promise<CurlReply> {
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      'curl',
      ['-s', '-S', '-D', '-', '-w', '\n%{http_code}', ...args],
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 30_000 },
      (err, out, errOut) => {
        if (err) reject(new Error(`curl ${args.join(' ')} failed: ${err.message} ${errOut}`));
        else resolve(out);
      },
    );
  });
  const codeAt = stdout.lastIndexOf('\n');
  const status = Number(stdout.slice(codeAt + 1));
  const rest = stdout.slice(0, codeAt);
  const headEnd = rest.indexOf('\r\n\r\n');
  const head = headEnd >= 0 ? rest.slice(0, headEnd) : '';
  const text = headEnd >= 0 ? rest.slice(headEnd + 4) : rest;
  const headers: Record<string, string> = {};
  for (const line of head.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0)
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  const httpVersion = /^HTTP\/(\S+)/.exec(head)?.[1] ?? '';
  return { status, text, body, headers, httpVersion };
}

/**
 * The management API through curl, with the headers docs/api.md asks for:
 * `Authorization: Bearer <key>`, `Service-Version: 2` and, with a body, `Content-Type`.
 * @example const edge = await new CurlApi(server.url, key).post('/edges/tcp', { description: 'x' });
 */
export class CurlApi {
  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  /** Send `method path` with an optional JSON body (a string is sent as is). */
  request(
    method: string,
    path: string,
    body?: unknown,
    extraArgs: string[] = [],
  ): Promise<CurlReply> {
    const args = [
      '-X',
      method,
      `${this.baseUrl}${path}`,
      '-H',
      `Authorization: Bearer ${this.key}`,
      '-H',
      'Service-Version: 2',
    ];
    if (body !== undefined) {
      args.push('-H', 'Content-Type: application/json');
      args.push('-d', typeof body === 'string' ? body : JSON.stringify(body));
    }
    return curl([...args, ...extraArgs]);
  }

  get(path: string): Promise<CurlReply> {
    return this.request('GET', path);
  }
  post(path: string, body: unknown): Promise<CurlReply> {
    return this.request('POST', path, body);
  }
  patch(path: string, body: unknown): Promise<CurlReply> {
    return this.request('PATCH', path, body);
  }
  put(path: string, body: unknown): Promise<CurlReply> {
    return this.request('PUT', path, body);
  }
  delete(path: string): Promise<CurlReply> {
    return this.request('DELETE', path);
  }
}
