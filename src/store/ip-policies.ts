import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class IpPolicyRepository {
  constructor(readonly deps: RepoDeps) {}
}
