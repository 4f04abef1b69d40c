import type { SecureVersion } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  startHelloCapture,
  type HelloCapture,
} from '../../../test/support/client-hello-capture.js';
import { offeredTlsVersion } from './client-hello.js';

let hellos: HelloCapture;

/** The ClientHello record a real Node TLS client sends with these version bounds. */
function captureHello(minVersion: SecureVersion, maxVersion: SecureVersion): Promise<Buffer> {
  return hellos.capture({ servername: 'v.burrow.test', minVersion, maxVersion });
}

beforeAll(async () => {
  hellos = await startHelloCapture();
});

afterAll(() => {
  hellos.close();
});

describe('offeredTlsVersion', () => {
  it('reads TLS 1.3 from supported_versions', async () => {
    expect(offeredTlsVersion(await captureHello('TLSv1.2', 'TLSv1.3'))).toBe('TLSv1.3');
  });

  it('reads TLS 1.2 from a client capped at 1.2 (no supported_versions)', async () => {
    expect(offeredTlsVersion(await captureHello('TLSv1.2', 'TLSv1.2'))).toBe('TLSv1.2');
  });

  it('gives undefined for anything but a complete ClientHello', async () => {
    const hello = await captureHello('TLSv1.2', 'TLSv1.3');
    expect(offeredTlsVersion(hello.subarray(0, hello.length - 1))).toBeUndefined();
    expect(offeredTlsVersion(Buffer.from('GET / HTTP/1.1\r\n'))).toBeUndefined();
  });

  it('skips GREASE and unknown codes in supported_versions', async () => {
    const hello = Buffer.from(await captureHello('TLSv1.2', 'TLSv1.3'));
    // Node's supported_versions extension: type 0x002b, 5 bytes, a 4-byte list of 1.3 and 1.2.
    const at = hello.indexOf(Buffer.from([0x00, 0x2b, 0x00, 0x05, 0x04, 0x03, 0x04, 0x03, 0x03]));
    expect(at).toBeGreaterThan(0);
    hello.writeUInt16BE(0x0a0a, at + 5); // 1.3 becomes a GREASE value
    expect(offeredTlsVersion(hello)).toBe('TLSv1.2');
  });
});
