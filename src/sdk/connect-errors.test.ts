import { describe, expect, it } from 'vitest';
import { RpcError } from '../protocol/index.js';
import {
  BurrowConnectError,
  CLI_HINTS,
  connectFailureKind,
  describeConnectError,
  describeConnectFailure,
  SDK_HINTS,
  type ConnectFailure,
  type PresentedCertificate,
} from './connect-errors.js';
import { BurrowAgentError, toAgentError } from './errors.js';

const NOW = new Date('2026-06-01T12:00:00Z');
const LEAF: PresentedCertificate = {
  name: 'localhost',
  fingerprint: 'sha256:11:22',
  altNames: ['localhost', '127.0.0.1', '::1'],
  validFrom: new Date('2026-05-01T00:00:00Z'),
  validTo: new Date('2026-08-01T00:00:00Z'),
};
const CA: PresentedCertificate = {
  name: 'Burrow local CA 1a2b3c4d',
  fingerprint: 'sha256:AB:CD',
  altNames: [],
  validFrom: new Date('2026-01-01T00:00:00Z'),
  validTo: new Date('2036-01-01T00:00:00Z'),
};

function failure(change: Partial<ConnectFailure>): ConnectFailure {
  return {
    kind: 'other',
    address: '127.0.0.1:4443',
    serverName: '127.0.0.1',
    code: undefined,
    detail: 'boom',
    chain: [LEAF, CA],
    ...change,
  };
}

describe('connectFailureKind', () => {
  it.each([
    ['SELF_SIGNED_CERT_IN_CHAIN', 'untrusted'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'untrusted'],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'untrusted'],
    ['UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'untrusted'],
    ['CERT_SIGNATURE_FAILURE', 'untrusted'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'name-mismatch'],
    ['CERT_NOT_YET_VALID', 'not-yet-valid'],
    ['CERT_HAS_EXPIRED', 'expired'],
    ['ECONNREFUSED', 'refused'],
    ['ENOTFOUND', 'unresolved'],
    ['EAI_AGAIN', 'unresolved'],
    ['EHOSTUNREACH', 'unreachable'],
    ['ETIMEDOUT', 'unreachable'],
    ['ECONNRESET', 'not-tls'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'not-tls'],
    ['EPROTO', 'not-tls'],
    ['SOMETHING_NEW', 'other'],
    [undefined, 'other'],
  ])('%s → %s', (code, kind) => {
    expect(connectFailureKind(code)).toBe(kind);
  });
});

describe('describeConnectFailure', () => {
  it('untrusted: names --ca, --ca-fingerprint and config add-ca, and shows the CA presented', () => {
    const text = describeConnectFailure(
      failure({
        kind: 'untrusted',
        code: 'SELF_SIGNED_CERT_IN_CHAIN',
        detail: 'self-signed certificate in certificate chain, SELF_SIGNED_CERT_IN_CHAIN',
      }),
      CLI_HINTS,
      NOW,
    );
    const [first, second, more] = text.split('\n');
    expect(more).toBeUndefined();
    expect(first).toBe(
      'failed to connect to 127.0.0.1:4443: its certificate is not trusted here (self-signed certificate in certificate chain, SELF_SIGNED_CERT_IN_CHAIN): it comes from "Burrow local CA 1a2b3c4d" sha256:AB:CD',
    );
    expect(second).toContain("--ca <file> (the server's <data-dir>/ca.pem)");
    expect(second).toContain('--ca-fingerprint <sha256>');
    expect(second).toContain('`burrow config add-ca <file|url>`');
  });

  it('untrusted, in the SDK words: the ca and caFingerprint options, no CLI command', () => {
    const text = describeConnectFailure(failure({ kind: 'untrusted' }), SDK_HINTS, NOW);
    expect(text).toContain('the `ca` option');
    expect(text).toContain('the `caFingerprint` option');
    expect(text).not.toContain('burrow config');
  });

  it('name mismatch: lists the names the certificate holds and how to get the right one', () => {
    const text = describeConnectFailure(
      failure({
        kind: 'name-mismatch',
        address: 'edge.example.com:4443',
        serverName: 'edge.example.com',
      }),
      CLI_HINTS,
      NOW,
    );
    expect(text).toMatch(
      /^failed to connect to edge\.example\.com:4443: its certificate is for localhost, 127\.0\.0\.1, ::1, not for edge\.example\.com\n/,
    );
    expect(text).toContain('--server <host:port>');
    expect(text).toContain('--agent-listen edge.example.com:<port>');
  });

  it('refused: says nothing listens at the address tried and asks whether the server runs', () => {
    const text = describeConnectFailure(
      failure({ kind: 'refused', code: 'ECONNREFUSED', chain: [] }),
      CLI_HINTS,
      NOW,
    );
    expect(text).toBe(
      'failed to connect to 127.0.0.1:4443: the connection was refused: nothing listens there\n' +
        'Is `burrow server` running there? Agents connect to its --agent-listen address (default 127.0.0.1:4443); give it with --server <host:port>.',
    );
  });

  it('clock skew: names the dates and the clock, both ways', () => {
    const early = describeConnectFailure(
      failure({ kind: 'not-yet-valid', chain: [{ ...LEAF, validFrom: new Date('2027-01-01') }] }),
      CLI_HINTS,
      NOW,
    );
    expect(early).toMatch(
      /certificate "localhost" is valid only from 2027-01-01T00:00:00Z, and this machine's clock says 2026-06-01T12:00:00Z\nCheck the clock/,
    );
    const late = describeConnectFailure(
      failure({ kind: 'expired', chain: [{ ...LEAF, validTo: new Date('2026-02-01') }, CA] }),
      CLI_HINTS,
      NOW,
    );
    expect(late).toMatch(/certificate "localhost" expired at 2026-02-01T00:00:00Z/);
    expect(late).toMatch(/renew/);
  });

  it('pin mismatch: shows the pin, the chain presented (CA first) and that nothing was sent', () => {
    const text = describeConnectFailure(
      failure({ kind: 'pin-mismatch', pin: 'sha256:EE:FF' }),
      CLI_HINTS,
      NOW,
    );
    expect(text.split('\n')[0]).toBe(
      'failed to connect to 127.0.0.1:4443: no certificate it presents has the fingerprint of --ca-fingerprint <sha256> (sha256:EE:FF); it presents "Burrow local CA 1a2b3c4d" sha256:AB:CD, "localhost" sha256:11:22. Nothing was sent to it',
    );
    expect(text.split('\n')[1]).toMatch(
      /^Compare --ca-fingerprint <sha256> with what `burrow server` printed/,
    );
  });

  it.each<[Partial<ConnectFailure>, RegExp]>([
    [
      { kind: 'unresolved', address: 'nope.invalid:4443', code: 'ENOTFOUND' },
      /the host nope\.invalid is not known \(ENOTFOUND\)\nCheck the host name in --server/,
    ],
    [
      { kind: 'unreachable', code: 'EHOSTUNREACH' },
      /cannot reach it \(EHOSTUNREACH\)\nCheck --server/,
    ],
    [{ kind: 'timeout', timeoutMs: 10_000 }, /no TLS connection within 10000 ms\nCheck --server/],
    [
      { kind: 'not-tls', detail: 'wrong version number' },
      /handshake failed \(wrong version number\): it does not look like a Burrow agent listener\nGive --server/,
    ],
    [
      { kind: 'other', detail: 'something odd' },
      /^failed to connect to 127\.0\.0\.1:4443: something odd$/,
    ],
  ])('%o', (change, expected) => {
    expect(describeConnectFailure(failure(change), CLI_HINTS, NOW)).toMatch(expected);
  });
});

describe('describeConnectError', () => {
  it('words a BurrowConnectError for its reader; its own message is in SDK words', () => {
    const err = new BurrowConnectError(failure({ kind: 'refused' }));
    expect(err).toBeInstanceOf(BurrowAgentError);
    expect(err.code).toBeUndefined();
    expect(err.message).toContain('the `serverAddr` option');
    expect(describeConnectError(err, CLI_HINTS)).toContain('--server <host:port>');
  });

  it('adds how to make an authtoken (POST /credentials) to the server refusals of one', () => {
    const refused = toAgentError(new RpcError('The authtoken is malformed.\n\nERR_NGROK_105'), 'x');
    const text = describeConnectError(refused, CLI_HINTS);
    expect(text).toMatch(/^The authtoken is malformed\. \(ERR_NGROK_105\)\n/);
    expect(text).toContain('POST /credentials');
    expect(text).toContain('--authtoken');
    expect(describeConnectError(new BurrowAgentError('unknown', 'ERR_NGROK_107'))).toMatch(
      /deleted\. Create an authtoken .*POST \/credentials.*the `authtoken` option/,
    );
    expect(describeConnectError(new BurrowAgentError('inactive', 'ERR_NGROK_636'))).toContain(
      'PATCH /bot_users/{id}',
    );
  });

  it('leaves other errors as they are, with their code', () => {
    expect(describeConnectError(new BurrowAgentError('taken', 'ERR_NGROK_334'))).toBe(
      'taken (ERR_NGROK_334)',
    );
    expect(describeConnectError(new Error('plain'))).toBe('plain');
    expect(describeConnectError('text')).toBe('text');
  });
});
