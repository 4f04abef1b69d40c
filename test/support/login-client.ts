import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { readReply } from './ingress.js';

/** One reply, with the URL it answered. */
export interface LoginReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  url: string;
}

/** Where a URL's requests really go: a local port, over TLS trusting `ca` when given. */
export type Route = (url: URL) => { port: number; ca?: string } | undefined;

/**
 * A browser's HTTP without a browser, for login flows: a cookie jar per host (names and values;
 * Max-Age=0 deletes), Node's http(s) client, and `route` sending test names (which Node cannot
 * resolve) to 127.0.0.1 with the name as Host and SNI. The test identity provider's login form
 * (oidc-provider's development interactions) is filled by signIn().
 * @example const c = new LoginClient((u) => (u.hostname === 'app.burrow.test' ? { port } : undefined)); await c.follow(url);
 */
export class LoginClient {
  readonly jar = new Map<string, Map<string, string>>();

  constructor(private readonly route: Route = () => undefined) {}

  cookies(host: string): Map<string, string> {
    let m = this.jar.get(host);
    if (!m) this.jar.set(host, (m = new Map()));
    return m;
  }

  send(
    url: string,
    opts: { method?: string; body?: string; headers?: Record<string, string> } = {},
  ): Promise<LoginReply> {
    const u = new URL(url);
    const jar = this.cookies(u.hostname);
    const headers: Record<string, string> = { host: u.host, ...opts.headers };
    if (jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (opts.body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const secure = u.protocol === 'https:';
    const to = this.route(u);
    const port = to?.port ?? Number(u.port || (secure ? 443 : 80));
    return new Promise((resolve, reject) => {
      const options = {
        host: '127.0.0.1',
        port,
        path: u.pathname + u.search,
        method: opts.method ?? 'GET',
        headers,
        agent: false as const,
      };
      const onResponse = (res: IncomingMessage) => {
        for (const line of res.headers['set-cookie'] ?? []) {
          const [pair, ...attrs] = line.split(';');
          const eq = pair!.indexOf('=');
          const name = pair!.slice(0, eq).trim();
          if (attrs.some((a) => /^\s*max-age=0\s*$/i.test(a))) jar.delete(name);
          else jar.set(name, pair!.slice(eq + 1).trim());
        }
        void readReply(res).then((reply) => resolve({ ...reply, url }), reject);
      };
      const req = secure
        ? httpsRequest({ ...options, servername: u.hostname, ca: to?.ca }, onResponse)
        : httpRequest(options, onResponse);
      req.on('error', reject);
      req.end(opts.body);
    });
  }

  /** GET `url` (or start from `first`) and follow redirects; every reply on the way, last one last. */
  async follow(url: string, first?: LoginReply): Promise<LoginReply[]> {
    const hops: LoginReply[] = [];
    let reply = first ?? (await this.send(url));
    for (;;) {
      hops.push(reply);
      const location = reply.headers.location;
      if (reply.status < 300 || reply.status > 399 || typeof location !== 'string') return hops;
      if (hops.length > 20) throw new Error('too many redirects');
      reply = await this.send(new URL(location, reply.url).href);
    }
  }

  /** Fill the provider's development login form in `reply` as `login`, then follow on. */
  async signIn(reply: LoginReply, login: string): Promise<LoginReply[]> {
    const action = /<form[^>]*action="([^"]+)"/.exec(reply.body)?.[1];
    if (!action) throw new Error(`no login form in ${reply.status} ${reply.body.slice(0, 300)}`);
    const posted = await this.send(new URL(action.replaceAll('&amp;', '&'), reply.url).href, {
      method: 'POST',
      body: new URLSearchParams({ prompt: 'login', login, password: 'whatever' }).toString(),
    });
    return this.follow(posted.url, posted);
  }

  /** Log in as `login` starting at `url`; the replies from the login form on. */
  async login(url: string, login: string): Promise<LoginReply[]> {
    const toForm = await this.follow(url);
    return this.signIn(toForm.at(-1)!, login);
  }
}
