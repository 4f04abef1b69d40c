import { X509Certificate } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { certificateMaker } from '../test-support/certificates.js';
import { certificateFields } from './x509-fields.js';

const maker = certificateMaker();
afterAll(() => maker.cleanup());

function der(subject: string, extensions: string[], key: 'ec' | 'rsa' = 'ec'): Buffer {
  return new X509Certificate(maker.make(subject, extensions, { key })).raw;
}

describe('certificateFields', () => {
  it('reads the subject CN, the key usage bits and the extended key usages', () => {
    const cert = der('/O=Acme/CN=Test CA', [
      'basicConstraints=critical,CA:TRUE',
      'keyUsage=critical,digitalSignature,keyCertSign,cRLSign,decipherOnly,keyAgreement',
      'extendedKeyUsage=serverAuth,clientAuth,1.2.3.4.5',
    ]);
    expect(certificateFields(cert)).toEqual({
      subjectCommonName: 'Test CA',
      keyUsages: ['digital_signature', 'key_agreement', 'cert_sign', 'crl_sign', 'decipher_only'],
      extendedKeyUsages: ['server_auth', 'client_auth', '1.2.3.4.5'],
    });
  });

  it('returns empty usages when the extensions are absent, and keeps UTF-8 and commas', () => {
    expect(certificateFields(der('/CN=Café, "Ops" CA', ['basicConstraints=CA:TRUE']))).toEqual({
      subjectCommonName: 'Café, "Ops" CA',
      keyUsages: [],
      extendedKeyUsages: [],
    });
  });

  it('reports the most specific CN, and no CN as empty', () => {
    expect(certificateFields(der('/CN=Root/CN=Leaf', [])).subjectCommonName).toBe('Leaf');
    expect(certificateFields(der('/O=Only Org', [])).subjectCommonName).toBe('');
  });

  it('reads RSA certificates too', () => {
    expect(certificateFields(der('/CN=RSA CA', ['keyUsage=keyCertSign'], 'rsa'))).toMatchObject({
      subjectCommonName: 'RSA CA',
      keyUsages: ['cert_sign'],
    });
  });

  it('throws on bytes that are not a certificate', () => {
    expect(() => certificateFields(new Uint8Array([0x30, 0x05, 0x02, 0x01]))).toThrow();
    expect(() => certificateFields(new Uint8Array([0x30, 0x00]))).toThrow();
    expect(() => certificateFields(new Uint8Array([]))).toThrow();
  });
});
