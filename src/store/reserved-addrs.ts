import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class ReservedAddrRepository {
  constructor(readonly deps: RepoDeps) {}
}
