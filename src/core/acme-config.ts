/**
 * The ACME options of the server (docs/certificates.md): the directory certificates are ordered
 * from (none: the local CA signs every certificate), the account's contact and external account
 * binding, a CA to trust for the directory's own HTTPS, and when to renew and retry. Read like
 * every server option (flag, environment, file) and checked together, since some only make sense
 * in pairs.
 */
import { readFileSync } from 'node:fs';

/** The ACME part of the server configuration (ServerConfig has every field). */
export interface AcmeConfig {
  /** ACME directory URL; empty: certificates come from the local CA. */
  acmeDirectory: string;
  acmeEmail: string;
  /** PEM text (read from the file given) trusted for the directory's own HTTPS, besides the system's. */
  acmeCaCert: string;
  /** External account binding, both or neither. */
  acmeEabKid: string;
  acmeEabHmacKey: string;
  /** Fraction of a certificate's lifetime after which it is renewed (default 2/3). */
  acmeRenewAfter: number;
  /** First retry delay after a failed order, in seconds; doubles up to an hour. */
  acmeRetryMin: number;
}

/**
 * Read and check the ACME options: `get` reads an option's text (flag, environment, file or
 * default), `fail` makes the error that names the option and the rule.
 * @example parseAcmeConfig(get, (name, rule) => new ConfigError(name, rule)).acmeRenewAfter // 0.6667
 */
export function parseAcmeConfig(
  get: (key: keyof AcmeConfig) => string,
  fail: (option: string, rule: string) => Error,
): AcmeConfig {
  const directory = get('acmeDirectory');
  if (directory && !/^https?:\/\/[^/]+/.test(directory)) {
    throw fail(
      'acme-directory',
      `'${directory}' must be the directory URL, e.g. https://acme-staging-v02.api.letsencrypt.org/directory (http:// only for a CA on this machine)`,
    );
  }
  const caFile = get('acmeCaCert');
  let caPem = '';
  if (caFile) {
    try {
      caPem = readFileSync(caFile, 'utf8');
    } catch (err) {
      throw fail(
        'acme-ca-cert',
        `cannot read ${caFile}: ${(err as Error).message}; give the path of a readable PEM file`,
      );
    }
    if (!caPem.includes('-----BEGIN CERTIFICATE-----')) {
      throw fail(
        'acme-ca-cert',
        `${caFile} holds no PEM certificate: give a file with a -----BEGIN CERTIFICATE----- block`,
      );
    }
  }
  const kid = get('acmeEabKid');
  const hmac = get('acmeEabHmacKey');
  if (Boolean(kid) !== Boolean(hmac)) {
    throw fail(
      kid ? 'acme-eab-hmac-key' : 'acme-eab-kid',
      'external account binding needs both --acme-eab-kid and --acme-eab-hmac-key',
    );
  }
  const renewAfter = Number(get('acmeRenewAfter'));
  if (!(renewAfter >= 0 && renewAfter < 1)) {
    throw fail('acme-renew-after', `'${get('acmeRenewAfter')}' must be a fraction in [0, 1)`);
  }
  const retryMin = Number(get('acmeRetryMin'));
  if (!(retryMin >= 1 && retryMin <= 3600)) {
    throw fail('acme-retry-min', `'${get('acmeRetryMin')}' must be 1-3600 seconds`);
  }
  return {
    acmeDirectory: directory,
    acmeEmail: get('acmeEmail'),
    acmeCaCert: caPem,
    acmeEabKid: kid,
    acmeEabHmacKey: hmac,
    acmeRenewAfter: renewAfter,
    acmeRetryMin: retryMin,
  };
}
