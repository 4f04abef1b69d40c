import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A certificate and its key, PEM. */
export interface KeyPair {
  certPem: string;
  keyPem: string;
}

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: 'pipe' });
}

/**
 * A CA and client certificates it signs, made with the openssl command (what users of mutual TLS
 * do), in a temp dir of its own.
 * @example
 * const pki = clientPki('Test Client CA');
 * const alice = pki.issue('alice');
 * tls.connect({ ..., cert: alice.certPem, key: alice.keyPem });
 */
export function clientPki(caName: string): {
  ca: KeyPair;
  issue(commonName: string): KeyPair;
  cleanup(): void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-pki-'));
  const caKey = join(dir, 'ca.key');
  const caCert = join(dir, 'ca.pem');
  openssl([
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-subj',
    `/CN=${caName}`,
    '-days',
    '30',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
    '-keyout',
    caKey,
    '-out',
    caCert,
  ]);
  let serial = 0;
  return {
    ca: { certPem: readFileSync(caCert, 'utf8'), keyPem: readFileSync(caKey, 'utf8') },
    issue(commonName) {
      serial++;
      const key = join(dir, `${serial}.key`);
      const csr = join(dir, `${serial}.csr`);
      const cert = join(dir, `${serial}.pem`);
      const ext = join(dir, `${serial}.ext`);
      writeFileSync(ext, 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n');
      openssl([
        'req',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-subj',
        `/CN=${commonName}`,
        '-keyout',
        key,
        '-out',
        csr,
      ]);
      openssl([
        'x509',
        '-req',
        '-in',
        csr,
        '-CA',
        caCert,
        '-CAkey',
        caKey,
        '-set_serial',
        String(serial + 1000),
        '-days',
        '30',
        '-extfile',
        ext,
        '-out',
        cert,
      ]);
      return { certPem: readFileSync(cert, 'utf8'), keyPem: readFileSync(key, 'utf8') };
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
