/**
 * The rules of what an agent may bind (docs/agents.md, "What an agent may bind"), in one class the
 * agent sessions ask: a bind's protocol and options are checked, its traffic policy compiled, and
 * its plan made by bind-plan-internal.ts, bind-plan-names.ts or bind-plan-tcp.ts; labeled
 * tunnels' labels and PatchTunnelState's policies are checked here too.
 */
import { aclPermits, aclReadsVault, type AclRule } from '../../core/acl.js';
import { CODES } from '../../core/errors.js';
import { shorten } from '../../core/quote.js';
import { LABEL_LIMITS, labelProblem } from '../../core/labels.js';
import { missingIpPoliciesMessage, ungrantedSecretRead } from '../../policy/index.js';
import type { Bind } from '../../protocol/index.js';
import type { Repositories } from '../../store/index.js';
import type { AgentEdgeSettings } from './agent-edge-settings.js';
import { AgentError, refusals } from './agent-errors.js';
import { optionRules, type OptionRules } from './bind-option-rules.js';
import { checkBindOptions } from './bind-options.js';
import {
  requestedAddr,
  requestedName,
  type Binder,
  type BindPlan,
  type BindPlanCall,
  type BindPlanContext,
  type MayReplace,
} from './bind-plan.js';
import { internalPlan } from './bind-plan-internal.js';
import { planName } from './bind-plan-names.js';
import { planTcp } from './bind-plan-tcp.js';
import { hostHeaderRewriteOf, proxyProtoOf } from './bind-tunnel-options.js';
import {
  bindPolicyText,
  compileBindPolicy,
  mergedPolicyText,
  type BindTrafficPolicy,
} from './bind-traffic-policy.js';
import type { BindGrant } from './session-resumption.js';
import type { OnlineTunnel, TunnelProto, TunnelRegistry } from '../registry/tunnel-registry.js';

const PROTOS: ReadonlySet<string> = new Set(['http', 'https', 'tcp', 'tls']);

/**
 * Checks and allocates binds (docs/agents.md, "What an agent may bind"). What a name or address
 * must be to be bound is each planner's (bind-plan-internal.ts, bind-plan-names.ts,
 * bind-plan-tcp.ts); one already online is refused unless `mayReplace` lets its holder go.
 *
 * @example
 * const plan = await policy.plan(bind, { credentialId, acl }, grant, (holder) => holder.sessionId === resumedFrom);
 * plan.url // 'https://k3j9x0a1b2.burrow.localhost:8443'
 */
export class BindPolicy {
  private readonly context: BindPlanContext;

  constructor(repos: Repositories, registry: TunnelRegistry, settings: AgentEdgeSettings) {
    this.context = { repos, registry, settings };
  }

  /**
   * Check `bind` for `binder` and decide where it is served. `grant` (a verified bind token)
   * restores the name or port an earlier bind with the same id was given.
   */
  async plan(
    bind: Bind,
    binder: Binder,
    grant: BindGrant | undefined,
    mayReplace: MayReplace,
  ): Promise<BindPlan> {
    const proto = typeof bind.Proto === 'string' ? bind.Proto.toLowerCase() : '';
    if (!PROTOS.has(proto)) {
      throw refusals.badRequest(
        `Proto ${shorten(JSON.stringify(bind.Proto ?? null))} is not one of http, https, tcp, tls`,
      );
    }
    checkBindOptions(bind.Opts, bind.Extra, proto);
    const proxyProto = proxyProtoOf(bind.Opts);
    const hostHeaderRewrite = hostHeaderRewriteOf(bind.Opts, proto);
    const given = bindPolicyText(bind.Opts);
    const options = optionRules(bind.Opts, bind.Extra, proto as TunnelProto);
    const trafficPolicy =
      given || options
        ? await this.checkTrafficPolicy(
            given?.text ?? '',
            proto as TunnelProto,
            given?.field ?? 'TrafficPolicy',
            binder,
            options,
          )
        : undefined;
    const pooling = bind.Extra?.PoolingEnabled === true;
    const extras = {
      pooling,
      ...(proxyProto ? { proxyProto } : {}),
      ...(hostHeaderRewrite ? { hostHeaderRewrite } : {}),
    };
    const poolable = (holder: OnlineTunnel): boolean =>
      mayReplace(holder) ||
      (pooling && this.context.registry.poolOf(holder).every((m) => m.pooling === true));
    const requested =
      proto === 'tcp' ? requestedAddr(bind) : requestedName(bind, this.context.settings.baseDomain);
    const restored = grant && grant.random && grant.proto === proto ? grant : undefined;
    const call: BindPlanCall = { ...this.context, binder, mayReplace: poolable, restored };
    const internal = internalPlan(call, bind, proto as TunnelProto, requested);
    if (internal) return { ...internal, ...extras, ...(trafficPolicy ? { trafficPolicy } : {}) };
    const plan =
      proto === 'tcp'
        ? await planTcp(call, requested)
        : await planName(call, proto as TunnelProto, requested);
    const pooled = { ...plan, ...extras };
    return trafficPolicy ? { ...pooled, trafficPolicy } : pooled;
  }

  /**
   * Check a bind's (or PatchTunnelState's) policy text for an endpoint of `proto` like the API
   * checks edges' policies, that the IP policies it names exist, and that `binder`'s ACL grants
   * every vault it reads secrets from; throws the refusal. With `options` (the rules of the
   * bind's options), the policy that runs is those rules, then the text's; `text` may then be ''
   * (no policy of its own).
   * @example await policy.checkTrafficPolicy(text, 'https', 'TrafficPolicy', binder)
   */
  async checkTrafficPolicy(
    text: string,
    proto: TunnelProto,
    field: string,
    binder: Binder,
    options?: OptionRules,
  ): Promise<BindTrafficPolicy> {
    let checked: BindTrafficPolicy;
    if (!options) {
      checked = { text, policy: compileBindPolicy(text, proto, field) };
    } else {
      // Each part alone first, so that an error names the option, or the agent's own rule.
      compileBindPolicy(mergedPolicyText(options, undefined, proto), proto, 'Opts');
      if (text !== '') compileBindPolicy(text, proto, field);
      const merged = mergedPolicyText(options, text === '' ? undefined : text, proto);
      checked = { text, policy: compileBindPolicy(merged, proto, field), options };
    }
    // Secrets are an authtoken's only by grant: a policy naming any other vault is refused.
    const ungranted = ungrantedSecretRead(checked.policy.secretReads, (vault) =>
      aclReadsVault(binder.acl, vault),
    );
    if (ungranted) throw refusals.secretNotGranted(field, ungranted, binder.credentialId);
    const missing = await this.context.repos.ipPolicies.missing(checked.policy.ipPolicyIds);
    if (missing.length > 0) {
      throw new AgentError(
        CODES.policyActionValue,
        `The traffic policy is not valid: ${missingIpPoliciesMessage(missing)}`,
      );
    }
    return checked;
  }

  /**
   * Check a labeled tunnel's labels (at least one, each well-formed, each permitted by the ACL)
   * and return them as given.
   * @example policy.checkLabels({ edge: 'edghts_…' }, acl)
   */
  checkLabels(labels: unknown, acl: readonly AclRule[]): Record<string, string> {
    if (
      labels !== undefined &&
      labels !== null &&
      (typeof labels !== 'object' || Array.isArray(labels))
    ) {
      throw refusals.badRequest('Labels must be an object of string keys and values');
    }
    const entries = Object.entries((labels ?? {}) as Record<string, unknown>);
    if (entries.length === 0) throw refusals.noLabels();
    if (entries.length > LABEL_LIMITS.maxLabels) {
      throw refusals.badLabel(
        `at most ${LABEL_LIMITS.maxLabels} labels are allowed, got ${entries.length}`,
      );
    }
    const out: Record<string, string> = {};
    for (const [key, value] of entries) {
      if (typeof value !== 'string')
        throw refusals.badLabel(`the value of ${JSON.stringify(key)} must be a string`);
      const problem = labelProblem(key, value);
      if (problem) throw refusals.badLabel(problem.message);
      if (!aclPermits(acl, { kind: 'labels', labels: { [key]: value } })) {
        throw refusals.aclLabel(key, value);
      }
      out[key] = value;
    }
    return out;
  }
}
