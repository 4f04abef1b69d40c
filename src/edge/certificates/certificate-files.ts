import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isIpLiteral } from './certificate-names.js';

/** The folder under the data folder where operators drop real certificates. */
export const CERTS_DIR = 'certs';

/** An operator-supplied certificate found on disk for a name. */
export interface CertificateFile {
  certPath: string;
  keyPath: string;
  /** Changes whenever either file is replaced, so caches can key on it. */
  version: string;
}

/** A certificate file read, checked and ready for `tls.createSecureContext`. */
export interface LoadedCertificate {
  certPem: string;
  keyPem: string;
  notAfter: Date;
}

/**
 * Finds a real certificate for `name` (normalized and validated: it becomes a file name) in
 * `certsDir`: `<name>.pem` + `<name>.key`; else, for a name one label below a parent,
 * `_wildcard.<parent>.pem` + `.key` (the mkcert convention) or `*.<parent>.pem` + `.key`.
 * @example await findCertificateFile('/data/certs', 'app.example.com')
 */
export async function findCertificateFile(
  certsDir: string,
  name: string,
): Promise<CertificateFile | undefined> {
  const bases = [name];
  const dot = name.indexOf('.');
  if (!isIpLiteral(name) && dot > 0 && name.indexOf('.', dot + 1) > 0) {
    const parent = name.slice(dot + 1);
    bases.push(`_wildcard.${parent}`, `*.${parent}`);
  }
  for (const base of bases) {
    const certPath = join(certsDir, `${base}.pem`);
    const keyPath = join(certsDir, `${base}.key`);
    const [certStat, keyStat] = await Promise.all([statIfFile(certPath), statIfFile(keyPath)]);
    if (certStat && keyStat) {
      const version = `${certStat.mtimeMs}:${certStat.size}:${keyStat.mtimeMs}:${keyStat.size}`;
      return { certPath, keyPath, version };
    }
  }
  return undefined;
}

/**
 * Reads a certificate file pair and checks that the key matches and that the certificate covers
 * `name`, so a wrong file fails loudly here rather than in every client's handshake.
 * @example const { certPem, keyPem } = await loadCertificateFile(file, 'app.example.com');
 */
export async function loadCertificateFile(
  file: CertificateFile,
  name: string,
): Promise<LoadedCertificate> {
  const [certPem, keyPem] = await Promise.all([
    readFile(file.certPath, 'utf8'),
    readFile(file.keyPath, 'utf8'),
  ]);
  const leaf = new X509Certificate(certPem);
  if (!leaf.checkPrivateKey(createPrivateKey(keyPem))) {
    throw new Error(`${file.keyPath} is not the key of ${file.certPath}`);
  }
  const covered = isIpLiteral(name) ? leaf.checkIP(name) : leaf.checkHost(name);
  if (covered === undefined) throw new Error(`${file.certPath} does not cover ${name}`);
  return { certPem, keyPem, notAfter: new Date(leaf.validTo) };
}

async function statIfFile(path: string): Promise<{ mtimeMs: number; size: number } | undefined> {
  try {
    const s = await stat(path);
    return s.isFile() ? { mtimeMs: s.mtimeMs, size: s.size } : undefined;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
