import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Makes real self-signed certificates with the openssl command, in a temp dir of its own. */
export interface CertificateMaker {
  /**
   * A PEM certificate for `subject` (openssl -subj form) with `extensions` (-addext values).
   * @example maker.make('/CN=Test CA', ['basicConstraints=critical,CA:TRUE'])
   */
  make(
    subject: string,
    extensions: string[],
    options?: { key?: 'ec' | 'rsa'; days?: number },
  ): string;
  /** The PEM private key of the last certificate made. */
  lastKey(): string;
  cleanup(): void;
}

/** The extensions of a typical CA certificate, as the briefs' openssl command makes it. */
export const CA_EXTENSIONS = ['basicConstraints=critical,CA:TRUE'];

export function certificateMaker(): CertificateMaker {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-certs-'));
  let count = 0;
  let keyFile = '';
  return {
    make(subject, extensions, options = {}) {
      count++;
      keyFile = join(dir, `${count}.key`);
      const out = join(dir, `${count}.pem`);
      const key =
        options.key === 'rsa'
          ? ['-newkey', 'rsa:2048']
          : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          ...key,
          '-nodes',
          '-utf8',
          '-subj',
          subject,
          '-days',
          String(options.days ?? 30),
          '-keyout',
          keyFile,
          '-out',
          out,
          ...extensions.flatMap((e) => ['-addext', e]),
        ],
        { stdio: 'pipe' },
      );
      return readFileSync(out, 'utf8');
    },
    lastKey: () => readFileSync(keyFile, 'utf8'),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}
