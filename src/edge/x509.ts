/**
 * The one place that loads @peculiar/x509. Its dependency injection (tsyringe) refuses to load
 * unless the `Reflect` metadata API exists, and no polyfill package (reflect-metadata) is
 * installed, so this module installs a minimal, spec-shaped stand-in first. It only adds the three
 * functions tsyringe calls, and only when they are missing, so a real polyfill loaded earlier wins.
 * ES modules evaluate their imports in order, so the shim below runs before @peculiar/x509.
 */
import './reflect-metadata-shim.js';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';

// Node's WebCrypto is structurally the DOM Crypto the library is typed against.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** ECDSA over P-256 with SHA-256: what every certificate Burrow mints uses. */
export const EC_P256 = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A WebCrypto key (Node has no global `CryptoKey` type without the DOM lib). */
export type CryptoKey = webcrypto.CryptoKey;

/** Node's WebCrypto `subtle`, typed for the key operations the certificate code needs. */
export const subtle = webcrypto.subtle;

/**
 * The configured @peculiar/x509 namespace.
 * @example const cert = new x509.X509Certificate(pem);
 */
export { x509 };
