import type { FastifyInstance } from 'fastify';
import type { ConfigTopic, OnlineState } from './context.js';

/** Changes after which an agent session may no longer stand: its credential or its bot user. */
const REVOKING =
  /^(?:DELETE \/(?:ssh_)?credentials\/[^/?]+|(?:PATCH|DELETE) \/bot_users\/[^/?]+)(?:\?|$)/;

/**
 * Changes that edges read when they load their configuration: what edges' modules refer to (IP
 * policies and their rules, backends, certificate authorities). Edges themselves and cloud
 * endpoints are announced by their repositories.
 */
const EDGE_INPUTS =
  /^(?:POST|PATCH|PUT|DELETE) \/(?:ip_policies|ip_policy_rules|backends|certificate_authorities)(?:[/?]|$)/;

/** The id a change to an edge input names in its path (`/backends/static/bkdst_…`, `/ip_policies/ipp_…`). */
const INPUT_ID = /^\/(?:ip_policies|certificate_authorities|backends\/[a-z_]+)\/([^/?]+)(?:\?|$)/;

/** A create of an IP policy, a backend or a CA: nothing refers to it yet. */
const INPUT_CREATE = /^POST \/(?:ip_policies|certificate_authorities|backends\/[a-z_]+)(?:\?|$)/;

/**
 * What edges read that this call changed, by id, so the edge reloads only the edges that read it:
 * [] when no edge can read it yet (a create), undefined when the call does not say (a rule's PATCH
 * or DELETE names the rule, not its policy: every edge is reloaded).
 */
function changedInputs(method: string, url: string, body: unknown): string[] | undefined {
  if (INPUT_CREATE.test(`${method} ${url}`)) return [];
  const id = INPUT_ID.exec(url)?.[1];
  if (id !== undefined) return [decodeURIComponent(id)];
  if (method === 'POST' && url.split('?')[0] === '/ip_policy_rules') {
    const policy = (body as { ip_policy_id?: unknown } | null)?.ip_policy_id;
    if (typeof policy === 'string') return [policy];
  }
  return undefined;
}

/** Changes to what certificates are served: uploaded ones, and reserved domains' settings. */
const CERTIFICATE_INPUTS =
  /^(?:POST|PATCH|PUT|DELETE) \/(?:tls_certificates|reserved_domains)(?:[/?]|$)/;

/** Changes to what traffic policies read with `secrets.get`: vaults and their secrets. */
const SECRET_INPUTS = /^(?:POST|PATCH|PUT|DELETE) \/(?:vaults|secrets)(?:[/?]|$)/;

/** Changes to where traffic events go: the edge rebuilds its routing table. */
const EVENT_INPUTS =
  /^(?:POST|PATCH|PUT|DELETE) \/(?:event_destinations|event_subscriptions)(?:[/?]|$)/;

/**
 * After a successful change, tell the edges at once rather than at their next periodic reload:
 * sessions whose credential or bot user was revoked are re-checked (`credentialsChanged`), edges
 * that read a changed backend, IP policy or CA reload (`configChanged('edges', ids)`) and
 * certificate caches are dropped (`configChanged`). In a cluster the callbacks announce it to
 * every node.
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
          : EVENT_INPUTS.test(call)
            ? 'events'
            : undefined;
    if (topic !== 'edges') {
      if (topic) configChanged?.(topic);
      return;
    }
    const inputs = changedInputs(request.method, request.url, request.body);
    // A new backend, IP policy or CA: no edge reads it yet, so there is nothing to reload.
    if (inputs?.length !== 0) configChanged?.(topic, inputs);
  });
}
