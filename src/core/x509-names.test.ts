import { X509Certificate, webcrypto } from 'node:crypto';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import { splitSubjectAltName } from './x509-names.js';

describe('splitSubjectAltName', () => {
  it('reads each kind, unquotes escaped values and shortens IPv6', () => {
    expect(
      splitSubjectAltName(
        'DNS:a.example, DNS:"weird\\u002cname", IP Address:10.0.0.1, IP Address:2001:DB8:0:0:0:0:0:1, email:x@y.z, URI:spiffe://a/b, DirName:"O=y\\u002cCN=x", othername:UPN:u@p',
      ),
    ).toEqual([
      { type: 'dns', value: 'a.example' },
      { type: 'dns', value: 'weird,name' },
      { type: 'ip', value: '10.0.0.1' },
      { type: 'ip', value: '2001:db8::1' },
      { type: 'email', value: 'x@y.z' },
      { type: 'url', value: 'spiffe://a/b' },
      { type: 'dn', value: 'O=y,CN=x' },
      { type: 'othername', value: 'UPN:u@p' },
    ]);
    expect(splitSubjectAltName(undefined)).toEqual([]);
    expect(splitSubjectAltName('')).toEqual([]);
    expect(splitSubjectAltName('IP Address:<invalid>')).toEqual([
      { type: 'ip', value: '<invalid>' },
    ]);
    // IPv4-mapped addresses stay in hex, as @peculiar/x509 (and a URL) writes them.
    expect(splitSubjectAltName('IP Address:0:0:0:0:0:FFFF:C000:201')).toEqual([
      { type: 'ip', value: '::ffff:c000:201' },
    ]);
  });

  it('agrees with @peculiar/x509 reading the same certificate', async () => {
    const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
    // Node's WebCrypto is structurally the DOM Crypto the library is typed against.
    const crypto = webcrypto as unknown as Parameters<
      typeof x509.X509CertificateGenerator.createSelfSigned
    >[1];
    const keys = await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify']);
    const cert = await x509.X509CertificateGenerator.createSelfSigned(
      {
        serialNumber: '01',
        name: 'CN=test',
        notBefore: new Date(),
        notAfter: new Date(Date.now() + 86_400_000),
        signingAlgorithm: alg,
        keys,
        extensions: [
          new x509.SubjectAlternativeNameExtension([
            { type: 'dns', value: 'a.example' },
            { type: 'dns', value: 'comma,name.example' },
            { type: 'dns', value: 'ünï.example' },
            { type: 'ip', value: '192.0.2.7' },
            { type: 'ip', value: '2001:db8:0:1::1' },
            { type: 'ip', value: '1:0:0:1:0:0:0:1' },
            { type: 'ip', value: '::ffff:c000:201' },
            { type: 'ip', value: '::' },
            { type: 'email', value: 'x@y.example' },
            { type: 'url', value: 'spiffe://a/b, DNS:not-a-name' },
          ]),
        ],
      },
      crypto,
    );
    const fromNode = splitSubjectAltName(
      new X509Certificate(Buffer.from(cert.rawData)).subjectAltName,
    );
    const fromDer = cert
      .getExtension(x509.SubjectAlternativeNameExtension)!
      .names.items.map((n) => ({ type: n.type, value: n.value }));
    expect(fromNode).toEqual(fromDer);
  });
});
