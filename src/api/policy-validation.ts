import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { aclReadsVault, parseAcl } from '../core/acl.js';
import { BurrowError, CODES, ValidationError } from '../core/errors.js';
import {
  compilePolicy,
  missingIpPoliciesMessage,
  notGrantedMessage,
  ungrantedSecretRead,
  type CompiledPolicy,
  type PolicyProtocol,
} from '../policy/index.js';
import type { Repositories } from '../store/index.js';
import { found } from './crud.js';

const ValidationReply = Type.Object({
  valid: Type.Boolean(),
  error: Type.Optional(
    Type.Object({
      error_code: Type.Optional(Type.String()),
      msg: Type.String(),
      details: Type.Record(Type.String(), Type.String()),
    }),
  ),
  location: Type.Optional(
    Type.Object({
      phase: Type.String(),
      rule: Type.Optional(Type.Integer()),
      rule_name: Type.Optional(Type.String()),
      action: Type.Optional(Type.Integer()),
      action_type: Type.Optional(Type.String()),
    }),
  ),
});

/** Where in the document the engine's message points: `phase X, rule N ("name"), action M (type)`. */
const LOCATION =
  /phase (\w+)(?:, rule (\d+)(?: \("((?:[^"\\]|\\.)*)"\))?)?(?:, action (\d+)(?: \(([^)]*)\))?)?/;

/**
 * The phase, rule and action a validation message names, for editors that point at them.
 * @example policyLocation('value: phase on_tcp_connect, rule 0 ("Block"): …') // { phase: 'on_tcp_connect', rule: 0, rule_name: 'Block' }
 */
export function policyLocation(message: string) {
  const m = LOCATION.exec(message);
  if (!m) return undefined;
  return {
    phase: m[1]!,
    ...(m[2] !== undefined ? { rule: Number(m[2]) } : {}),
    ...(m[3] !== undefined ? { rule_name: m[3] } : {}),
    ...(m[4] !== undefined ? { action: Number(m[4]) } : {}),
    ...(m[5] !== undefined ? { action_type: m[5] } : {}),
  };
}

/**
 * Check a traffic policy as every save and `POST /traffic_policy/validate` do: compile it, then
 * refuse IP policies (`ipp_…`, restrict-ips) that do not exist, with the code and words a bind
 * refuses them with, so that no place accepts a policy another refuses. Throws a
 * {@link ValidationError} naming `field`; returns the compiled policy.
 * @example await checkSavedPolicy(repos, body.traffic_policy, 'https', 'traffic_policy')
 */
export async function checkSavedPolicy(
  repos: Repositories,
  text: string,
  protocol: PolicyProtocol,
  field: string,
): Promise<CompiledPolicy> {
  const policy = compilePolicy(text, { protocol, field });
  const missing = await repos.ipPolicies.missing(policy.ipPolicyIds);
  if (missing.length > 0) {
    throw new ValidationError(CODES.policyActionValue, field, missingIpPoliciesMessage(missing));
  }
  return policy;
}

/**
 * The first vault `policy` reads that credential `credentialId`'s ACL does not grant, as the
 * bind refusal's message (field `value`), or undefined when it may read them all.
 */
async function notGrantedTo(
  repos: Repositories,
  credentialId: string,
  policy: CompiledPolicy,
): Promise<string | undefined> {
  const credential = found(await repos.credentials.get(credentialId));
  const acl = parseAcl(credential.acl);
  const rules = 'error' in acl ? [] : acl.rules;
  const read = ungrantedSecretRead(policy.secretReads, (vault) => aclReadsVault(rules, vault));
  return read && notGrantedMessage('value', read, credential.id);
}

/**
 * `POST /traffic_policy/validate`: run a traffic policy through the engine that would run it,
 * without saving anything, so editors can check as the user types. The answer is 200 either way:
 * `{valid: true}`, or `{valid: false, error}` with the code, message and details (phase, rule,
 * action) that saving would give, including a bind's checks on what the policy names (IP
 * policies that must exist). With `credential_id`, also whether an agent with that
 * authtoken could bind it: every vault the policy reads secrets from must be granted by a
 * `secrets:read:` rule in the credential's ACL (`ERR_BURROW_SECRET_NOT_GRANTED` otherwise).
 * @example await policyValidationRoutes(app, ctx);
 */
export async function policyValidationRoutes(
  fastify: FastifyInstance,
  { repos }: { repos: Repositories },
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.post(
    '/traffic_policy/validate',
    {
      schema: {
        tags: ['Traffic policy'],
        summary: 'Validate a traffic policy without saving it',
        body: Type.Object(
          {
            value: Type.String({ maxLength: 128 * 1024, description: 'the policy, JSON or YAML' }),
            protocol: Type.Union(
              [
                Type.Literal('http'),
                Type.Literal('https'),
                Type.Literal('tcp'),
                Type.Literal('tls'),
              ],
              { description: 'the protocol of the endpoint or edge it is for' },
            ),
            credential_id: Type.Optional(
              Type.String({
                description:
                  "check it as an agent with this authtoken (cr_…) would bind it: the credential's acl must grant every vault the policy reads secrets from (secrets:read:<vault>)",
              }),
            ),
          },
          { additionalProperties: false },
        ),
        response: { 200: ValidationReply },
      },
    },
    async (request) => {
      const { value, protocol, credential_id: credentialId } = request.body;
      try {
        const policy = await checkSavedPolicy(repos, value, protocol, 'value');
        const refusal =
          credentialId === undefined ? undefined : await notGrantedTo(repos, credentialId, policy);
        if (refusal === undefined) return { valid: true };
        const location = policyLocation(refusal);
        return {
          valid: false,
          error: { error_code: CODES.secretNotGranted, msg: refusal, details: { field: 'value' } },
          ...(location ? { location } : {}),
        };
      } catch (err) {
        if (!(err instanceof BurrowError) || err.statusCode !== 400) throw err;
        const location = policyLocation(err.message);
        return {
          valid: false,
          error: { error_code: err.code, msg: err.message, details: err.details },
          ...(location ? { location } : {}),
        };
      }
    },
  );
}
