/**
 * @peculiar/x509 for the edge, with its crypto provider set (issuing and signing need one). Its
 * dependency injection (tsyringe) needs the `Reflect` metadata API, so the reflect-metadata
 * polyfill is loaded first (ES modules evaluate their imports in order). The store, which only
 * parses certificates, imports the library the same way; acme-client's own copy loads the same
 * polyfill.
 */
import 'reflect-metadata';
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
