import type { FastifyInstance } from 'fastify';
import type { ConfigTopic, OnlineState } from './context.js';

/** Changes after which an agent session may no longer stand: its credential or its bot user. */
const REVOKING = /^(?:DELETE \/credentials\/[^/?]+|(?:PATCH|DELETE) \/bot_users\/[^/?]+)(?:\?|$)/;

/**
 * Changes that edges read when they load their configuration: what edges' modules refer to (IP
 * policies and their rules, backends, certificate authorities). Edges themselves and cloud
 * endpoints are announced by their repositories.
 */
const EDGE_INPUTS =
  /^(?:POST|PATCH|PUT|DELETE) \/(?:ip_policies|ip_policy_rules|backends|certificate_authorities)(?:[/?]|$)/;

/** Changes to what certificates are served: uploaded ones, and reserved domains' settings. */
const CERTIFICATE_INPUTS =
  /^(?:POST|PATCH|PUT|DELETE) \/(?:tls_certificates|reserved_domains)(?:[/?]|$)/;

/** Changes to what traffic policies read with `secrets.get`: vaults and their secrets. */
const SECRET_INPUTS = /^(?:POST|PATCH|PUT|DELETE) \/(?:vaults|secrets)(?:[/?]|$)/;

/**
 * After a successful change, tell the edges at once rather than at their next periodic reload:
 * sessions whose credential or bot user was revoked are re-checked (`credentialsChanged`), edges
 * reload what their modules refer to and certificate caches are dropped (`configChanged`). In a
 * cluster the callbacks announce it to every node.
 * @example installChangeNotices(app, ctx.online);
 */
export function installChangeNotices(app: FastifyInstance, online: OnlineState): void {
  const { credentialsChanged, configChanged } = online;
  if (!credentialsChanged && !configChanged) return;
  app.addHook('onResponse', async (request, reply) => {
    if (reply.statusCode >= 300) return;
    const call = `${request.method} ${request.url}`;
    if (REVOKING.test(call)) credentialsChanged?.();
    const topic: ConfigTopic | undefined = EDGE_INPUTS.test(call)
      ? 'edges'
      : CERTIFICATE_INPUTS.test(call)
        ? 'certificates'
        : SECRET_INPUTS.test(call)
          ? 'secrets'
          : undefined;
    if (topic) configChanged?.(topic);
  });
}
