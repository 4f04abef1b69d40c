import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class CredentialRepository {
  constructor(readonly deps: RepoDeps) {}
}
