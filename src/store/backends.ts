import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class BackendRepository {
  constructor(readonly deps: RepoDeps) {}
}
