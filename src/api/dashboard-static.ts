/**
 * The dashboard's files (built from web/ by `npm run build` into dist/web): `GET /` answers
 * browsers (Accept: text/html) with the page, and `/dashboard/*` serves its scripts and styles.
 * API clients asking for `/` get the API's usual 404, so nothing changes for them.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** Where `npm run build` puts the dashboard: the same folder from src/api and from dist/api. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../../dist/web/', import.meta.url));

/**
 * Nothing but the page's own files may load or run: no inline script, no other origin, no frame.
 * React sets styles through the DOM, which style-src does not restrict.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function wantsHtml(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html');
}

/**
 * Serve the dashboard from `dir` (default {@link DASHBOARD_DIR}).
 * @example await dashboardRoutes(app);
 */
export async function dashboardRoutes(
  app: FastifyInstance,
  dir: string = DASHBOARD_DIR,
): Promise<void> {
  const built = existsSync(`${dir}index.html`);
  if (built) {
    await app.register(fastifyStatic, {
      root: dir,
      prefix: '/dashboard/',
      index: false,
      wildcard: true,
      // Built file names carry a content hash, so they can be kept for good.
      immutable: true,
      maxAge: '365d',
    });
  }
  const page = async (request: FastifyRequest, reply: FastifyReply) => {
    if (!wantsHtml(request)) return reply.callNotFound();
    void reply.headers(SECURITY_HEADERS);
    if (!built) {
      return reply
        .type('text/plain; charset=utf-8')
        .status(503)
        .send('The dashboard is not built. Run `npm run build`, then restart burrow server.\n');
    }
    // The page itself names the current files, so it must never be cached.
    return reply
      .header('cache-control', 'no-store')
      .sendFile('index.html', dir, { maxAge: 0, immutable: false });
  };
  app.get('/', { schema: { hide: true } }, page);
}
