import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class EdgeRepository {
  constructor(readonly deps: RepoDeps) {}
}
