import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class ReservedDomainRepository {
  constructor(readonly deps: RepoDeps) {}
}
