/**
 * Traffic policies of the device agent: the policy a create request gives, and the default
 * policy file (`--default-policy`, test.json) applied to tunnels created without one. Both are
 * checked by the policy engine before anything is bound, so the edge never gets a policy that
 * cannot run.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { BurrowError } from '../core/errors.js';
import { compileDocument, compilePolicy, parsePolicyValue } from '../policy/index.js';
import { AgentApiError, AgentStartupError } from './errors.js';

/** The protocols a device-agent tunnel can have (`http` is the default, docs/device-agent.md). */
export const TUNNEL_PROTOCOLS = ['http', 'tcp', 'tls'] as const;
export type TunnelProtocol = (typeof TUNNEL_PROTOCOLS)[number];

/** A tunnel's own policy as the create request gave it: an object, or JSON/YAML text. */
export type PolicyValue = Record<string, unknown> | string;

/**
 * Check `value` with the policy engine for a tunnel of `protocol`; throws a 400
 * {@link AgentApiError} carrying the engine's code (ERR_NGROK_22xx) and message, which name the
 * rule, the action and the problem.
 * @example checkPolicy({ inbound: [{ actions: [{ type: 'deny' }] }] }, 'http')
 */
export function checkPolicy(value: PolicyValue, protocol: TunnelProtocol, field = 'policy'): void {
  try {
    if (typeof value === 'string') compilePolicy(value, { protocol, field });
    else compileDocument(parsePolicyValue(value, field), { protocol, field });
  } catch (err) {
    if (err instanceof BurrowError) {
      throw new AgentApiError(400, err.message, { code: err.code, field });
    }
    throw err;
  }
}

/**
 * The policy as JSON text: what a bind carries and what `GET /tunnels` shows. Text (YAML or
 * JSON) is parsed and re-serialised, so the list always holds JSON.
 * @example policyJson({ inbound: [] }) // '{"inbound":[]}'
 * @example policyJson('inbound: []') // '{"inbound":[]}'
 */
export function policyJson(value: PolicyValue): string {
  return JSON.stringify(typeof value === 'string' ? parseYaml(value) : value);
}

/** The default policy file, loaded and checked. */
export interface DefaultPolicy {
  /** Absolute path of the file. */
  path: string;
  /** The document as JSON text. */
  json: string;
  /** Why the document cannot run on a protocol (for example response rules on tcp), by protocol. */
  unusableOn: Partial<Record<TunnelProtocol, string>>;
}

/**
 * The default policy's JSON text for a tunnel of `protocol`, or undefined when there is none or
 * it cannot run there (tcp and tls tunnels have no HTTP phases).
 * @example defaultPolicyFor(defaults, 'http') // '{"inbound":[],"outbound":[…]}'
 */
export function defaultPolicyFor(
  defaults: DefaultPolicy | undefined,
  protocol: TunnelProtocol,
): string | undefined {
  if (!defaults || defaults.unusableOn[protocol] !== undefined) return undefined;
  return defaults.json;
}

/**
 * Read and check the default policy file. A file that cannot be read, parsed, or that the
 * engine refuses for http tunnels stops the agent with a message naming it. A missing file is
 * an error only when the user named it (`explicit`); the implicit `test.json` may be absent,
 * and then this returns undefined (no default policy).
 * @example const defaults = loadDefaultPolicy('test.json', false);
 */
export function loadDefaultPolicy(path: string, explicit: boolean): DefaultPolicy | undefined {
  const absolute = resolve(path);
  let text: string;
  try {
    text = readFileSync(absolute, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && !explicit) return undefined;
    throw new AgentStartupError(
      `cannot read the default policy file ${absolute}: ${(err as Error).message}`,
    );
  }
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new AgentStartupError(
      `the default policy file ${absolute} is not valid JSON or YAML: ${(err as Error).message}`,
    );
  }
  const fix = 'fix it, or point --default-policy at another file';
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new AgentStartupError(
      `the default policy file ${absolute} must hold a policy object (inbound/outbound or on_http_request/on_http_response lists); ${fix}`,
    );
  }
  const document = value as Record<string, unknown>;
  try {
    checkPolicy(document, 'http', 'policy');
  } catch (err) {
    throw new AgentStartupError(
      `the default policy file ${absolute} is not a valid traffic policy: ${(err as Error).message}; ${fix}`,
    );
  }
  const unusableOn: Partial<Record<TunnelProtocol, string>> = {};
  for (const protocol of ['tcp', 'tls'] as const) {
    try {
      checkPolicy(document, protocol, 'policy');
    } catch (err) {
      unusableOn[protocol] = (err as Error).message;
    }
  }
  return { path: absolute, json: JSON.stringify(document), unusableOn };
}
