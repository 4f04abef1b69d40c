import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class IpPolicyRuleRepository {
  constructor(readonly deps: RepoDeps) {}
}
