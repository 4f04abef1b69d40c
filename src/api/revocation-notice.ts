import type { FastifyInstance } from 'fastify';
import type { OnlineState } from './context.js';

/** Changes after which an agent session may no longer stand: its credential or its bot user. */
const REVOKING = /^(?:DELETE \/credentials\/[^/?]+|(?:PATCH|DELETE) \/bot_users\/[^/?]+)(?:\?|$)/;

/**
 * After a successful change that can revoke agent sessions (a credential deleted, a bot user
 * deactivated or deleted), tell this process's edge to re-check its sessions at once. Edges in
 * other processes find out from their periodic store check.
 * @example installRevocationNotice(app, ctx.online);
 */
export function installRevocationNotice(app: FastifyInstance, online: OnlineState): void {
  const notify = online.credentialsChanged;
  if (!notify) return;
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 300) return;
    if (REVOKING.test(`${request.method} ${request.url}`)) notify();
  });
}
