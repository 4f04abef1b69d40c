import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { quote } from '../../core/quote.js';
import type { ConfigReader } from './config.js';
import {
  CLOSE,
  type ActionSpec,
  type ClientCertificateStrategy,
  type TlsTermination,
  type TlsVersion,
} from './types.js';

const VERSIONS: readonly TlsVersion[] = ['1.2', '1.3'];
const STRATEGIES: readonly ClientCertificateStrategy[] = [
  'require-and-verify',
  'require-any',
  'request',
];
/** Enough for any real trust list; each one is parsed when the policy compiles. */
const MAX_CAS = 100;
const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

function version(config: ConfigReader, key: string, fallback: TlsVersion): TlsVersion {
  const given = config.string(key);
  if (given === undefined) return fallback;
  if (!(VERSIONS as readonly string[]).includes(given)) {
    config.fail(key, `must be "1.2" or "1.3", not ${quote(given, '"')}`);
  }
  return given as TlsVersion;
}

function noInterpolation(config: ConfigReader, key: string, text: string): void {
  if (text.includes('${')) config.fail(key, 'must be PEM text; ${} expressions are not supported');
}

/** The certificates of PEM `text` (one or more blocks), or a 2204 naming `key`. */
function certificates(config: ConfigReader, key: string, text: string): X509Certificate[] {
  noInterpolation(config, key, text);
  const blocks = text.match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) {
    config.fail(key, 'must be a PEM certificate (-----BEGIN CERTIFICATE-----)');
  }
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      return config.fail(
        key,
        `has a certificate (block ${i}) that does not parse: ${(err as Error).message}`,
      );
    }
  });
}

function privateKey(config: ConfigReader, key: string, text: string): KeyObject {
  noInterpolation(config, key, text);
  try {
    return createPrivateKey(text);
  } catch (err) {
    return config.fail(
      key,
      `must be a PEM private key (unencrypted) that parses: ${(err as Error).message}`,
    );
  }
}

function serverCertificate(config: ConfigReader): TlsTermination['certificate'] {
  const certPem = config.string('server_certificate');
  const keyPem = config.string('server_private_key');
  if (certPem === undefined && keyPem === undefined) return undefined;
  if (certPem === undefined)
    config.fail('server_certificate', 'is required with server_private_key');
  if (keyPem === undefined)
    config.fail('server_private_key', 'is required with server_certificate');
  const [leaf] = certificates(config, 'server_certificate', certPem);
  const key = privateKey(config, 'server_private_key', keyPem);
  if (!leaf!.checkPrivateKey(key)) {
    config.fail('server_private_key', 'does not match the key of server_certificate');
  }
  return { certPem, keyPem };
}

function clientCas(config: ConfigReader): string[] | undefined {
  const key = 'mutual_tls_certificate_authorities';
  const list = config.stringList(key, { min: 1, max: MAX_CAS });
  if (list === undefined) return undefined;
  const pems: string[] = [];
  list.forEach((entry, i) => {
    const at = `${key}[${i}]`;
    if (/^\s*ca_[A-Za-z0-9]+\s*$/.test(entry)) {
      config.fail(
        at,
        `names a certificate authority by id (${entry.trim()}); give its PEM instead`,
      );
    }
    for (const cert of certificates(config, at, entry)) {
      if (!cert.ca) {
        config.fail(
          at,
          `holds a certificate that is not a CA (${cert.subject.replaceAll('\n', ', ')}): it needs basicConstraints CA:TRUE`,
        );
      }
      pems.push(cert.toString());
    }
  });
  return pems;
}

/**
 * `terminate-tls`: end the client's TLS at the edge (on_tcp_connect of TLS endpoints) with the
 * edge's certificate for the name, or `server_certificate`/`server_private_key`; TLS
 * `min_version`..`max_version` (1.2 to 1.3 by default); with `mutual_tls_certificate_authorities`,
 * a client certificate that chains to one of them (`mutual_tls_verification_strategy`
 * `require-and-verify`, the default; `require-any` and `request` do not verify, as in ngrok). The
 * agent then gets plaintext, and rules after this action see `conn.tls.*` of the finished
 * handshake, `conn.tls.client.*` included. Everything is parsed and checked when the policy is
 * saved; a failed handshake closes the connection.
 * @example { type: 'terminate-tls', config: { min_version: '1.3', mutual_tls_certificate_authorities: [caPem] } }
 */
export const terminateTlsAction: ActionSpec = {
  type: 'terminate-tls',
  phases: ['on_tcp_connect'],
  // HTTPS endpoints always end TLS at the edge, with its settings; TCP ones have no TLS to end.
  protocols: ['tls'],
  termination: 'conditionally',
  configKeys: [
    'min_version',
    'max_version',
    'server_certificate',
    'server_private_key',
    'mutual_tls_certificate_authorities',
    'mutual_tls_verification_strategy',
  ],
  compile(config) {
    const minVersion = version(config, 'min_version', '1.2');
    const maxVersion = version(config, 'max_version', '1.3');
    if (minVersion > maxVersion) {
      config.fail('min_version', `(${minVersion}) must not be above max_version (${maxVersion})`);
    }
    const certificate = serverCertificate(config);
    const cas = clientCas(config);
    const strategyKey = 'mutual_tls_verification_strategy';
    const strategy = config.string(strategyKey);
    if (strategy !== undefined && !(STRATEGIES as readonly string[]).includes(strategy)) {
      config.fail(
        strategyKey,
        `must be one of ${STRATEGIES.join(', ')}, not ${quote(strategy, '"')}`,
      );
    }
    if (strategy === 'require-and-verify' && cas === undefined) {
      config.fail(
        strategyKey,
        'require-and-verify needs mutual_tls_certificate_authorities to verify against',
      );
    }
    const settings: TlsTermination = Object.freeze({
      minVersion,
      maxVersion,
      certificate,
      clientCas: cas,
      clientAuth:
        (strategy as ClientCertificateStrategy | undefined) ??
        (cas ? 'require-and-verify' : undefined),
    });
    return {
      alwaysTerminates: false,
      async run(c) {
        if (await c.terminateTls(settings)) return undefined;
        c.event(
          'closed',
          'TLS was not terminated (handshake failed or refused); connection closed',
        );
        return CLOSE;
      },
    };
  },
};
