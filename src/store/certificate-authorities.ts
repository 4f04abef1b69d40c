import type { RepoDeps } from './deps.js';

/** PLACEHOLDER: being written. */
export class CertificateAuthorityRepository {
  constructor(readonly deps: RepoDeps) {}
}
