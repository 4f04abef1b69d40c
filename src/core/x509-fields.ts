/**
 * The few certificate fields Node's X509Certificate does not expose in a usable form: the subject
 * common name as stored (Node prints the subject with OpenSSL escaping), the key usage bits (Node
 * has no API for them) and the extended key usages by name. A minimal DER reader suffices: X.509
 * certificates are DER, and only the TBSCertificate's subject and extensions are read.
 */

interface Tlv {
  tag: number;
  /** Offset of the first value byte. */
  start: number;
  /** Offset just past the value. */
  end: number;
}

class DerError extends Error {}

function readTlv(der: Uint8Array, offset: number, limit: number): Tlv {
  if (offset + 2 > limit) throw new DerError('truncated DER element');
  const tag = der[offset]!;
  if ((tag & 0x1f) === 0x1f) throw new DerError('multi-byte DER tags are not used in X.509');
  let length = der[offset + 1]!;
  let start = offset + 2;
  if (length & 0x80) {
    const count = length & 0x7f;
    if (count === 0 || count > 4 || start + count > limit) throw new DerError('bad DER length');
    length = 0;
    for (let i = 0; i < count; i++) length = length * 256 + der[start + i]!;
    start += count;
  }
  const end = start + length;
  if (end > limit) throw new DerError('DER element runs past its parent');
  return { tag, start, end };
}

function childrenOf(der: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let offset = parent.start; offset < parent.end;) {
    const child = readTlv(der, offset, parent.end);
    out.push(child);
    offset = child.end;
  }
  return out;
}

function oidText(der: Uint8Array, tlv: Tlv): string {
  const arcs: number[] = [];
  let value = 0;
  for (let i = tlv.start; i < tlv.end; i++) {
    const byte = der[i]!;
    value = value * 128 + (byte & 0x7f);
    if (byte & 0x80) continue;
    if (arcs.length > 0) arcs.push(value);
    // The first subidentifier packs two arcs: 40 * first + second, with first at most 2.
    else if (value < 80) arcs.push(Math.floor(value / 40), value % 40);
    else arcs.push(2, value - 80);
    value = 0;
  }
  return arcs.join('.');
}

const TAG = {
  bitString: 0x03,
  octetString: 0x04,
  oid: 0x06,
  utf8String: 0x0c,
  printableString: 0x13,
  teletexString: 0x14,
  ia5String: 0x16,
  universalString: 0x1c,
  bmpString: 0x1e,
  version: 0xa0,
  extensions: 0xa3,
} as const;

function decodeString(der: Uint8Array, tlv: Tlv): string {
  const bytes = der.subarray(tlv.start, tlv.end);
  switch (tlv.tag) {
    case TAG.bmpString:
      return new TextDecoder('utf-16be').decode(bytes);
    case TAG.universalString: {
      let out = '';
      for (let i = 0; i + 3 < bytes.length; i += 4) {
        out += String.fromCodePoint(
          ((bytes[i]! << 24) | (bytes[i + 1]! << 16) | (bytes[i + 2]! << 8) | bytes[i + 3]!) >>> 0,
        );
      }
      return out;
    }
    case TAG.teletexString:
      return new TextDecoder('latin1').decode(bytes);
    default:
      return new TextDecoder('utf-8').decode(bytes);
  }
}

/** RFC 5280 KeyUsage bit names, bit 0 first, in the snake_case the API uses. */
const KEY_USAGE_NAMES = [
  'digital_signature',
  'content_commitment',
  'key_encipherment',
  'data_encipherment',
  'key_agreement',
  'cert_sign',
  'crl_sign',
  'encipher_only',
  'decipher_only',
] as const;

/** Extended key usage OIDs by API name; others are reported as their dotted OID. */
const EXTENDED_KEY_USAGE_NAMES: Record<string, string> = {
  '2.5.29.37.0': 'any',
  '1.3.6.1.5.5.7.3.1': 'server_auth',
  '1.3.6.1.5.5.7.3.2': 'client_auth',
  '1.3.6.1.5.5.7.3.3': 'code_signing',
  '1.3.6.1.5.5.7.3.4': 'email_protection',
  '1.3.6.1.5.5.7.3.5': 'ipsec_end_system',
  '1.3.6.1.5.5.7.3.6': 'ipsec_tunnel',
  '1.3.6.1.5.5.7.3.7': 'ipsec_user',
  '1.3.6.1.5.5.7.3.8': 'time_stamping',
  '1.3.6.1.5.5.7.3.9': 'ocsp_signing',
};

const OID = {
  commonName: '2.5.4.3',
  keyUsage: '2.5.29.15',
  extendedKeyUsage: '2.5.29.37',
} as const;

/** What Burrow shows of a certificate beyond what Node reports directly. */
export interface CertificateFields {
  /** The last CN of the subject (the most specific one), or '' when there is none. */
  subjectCommonName: string;
  /** Key usage names; [] when the certificate has no KeyUsage extension. */
  keyUsages: string[];
  /** Extended key usage names (dotted OIDs for unnamed ones); [] when absent. */
  extendedKeyUsages: string[];
}

function keyUsagesFrom(der: Uint8Array, octets: Tlv): string[] {
  const bits = readTlv(der, octets.start, octets.end);
  if (bits.tag !== TAG.bitString || bits.end <= bits.start) throw new DerError('bad KeyUsage');
  const usages: string[] = [];
  KEY_USAGE_NAMES.forEach((name, bit) => {
    const index = bits.start + 1 + (bit >> 3);
    if (index < bits.end && der[index]! & (0x80 >> (bit & 7))) usages.push(name);
  });
  return usages;
}

function extendedKeyUsagesFrom(der: Uint8Array, octets: Tlv): string[] {
  const sequence = readTlv(der, octets.start, octets.end);
  return childrenOf(der, sequence)
    .filter((t) => t.tag === TAG.oid)
    .map((t) => {
      const oid = oidText(der, t);
      return EXTENDED_KEY_USAGE_NAMES[oid] ?? oid;
    });
}

/**
 * Read the subject CN and the key usages from a DER certificate (`X509Certificate.raw`).
 * Throws when the DER is not a certificate.
 * @example certificateFields(new X509Certificate(pem).raw) // { subjectCommonName: 'Test CA', keyUsages: ['cert_sign'], ... }
 */
export function certificateFields(der: Uint8Array): CertificateFields {
  const certificate = readTlv(der, 0, der.length);
  const tbs = childrenOf(der, certificate)[0];
  if (!tbs) throw new DerError('no TBSCertificate');
  const fields = childrenOf(der, tbs);
  // serial, signature, issuer, validity, subject follow the optional [0] version.
  const subject = fields[(fields[0]?.tag === TAG.version ? 1 : 0) + 4];
  if (!subject) throw new DerError('no subject');

  let subjectCommonName = '';
  for (const rdn of childrenOf(der, subject)) {
    for (const attribute of childrenOf(der, rdn)) {
      const [type, value] = childrenOf(der, attribute);
      if (type && value && oidText(der, type) === OID.commonName) {
        subjectCommonName = decodeString(der, value);
      }
    }
  }

  let keyUsages: string[] = [];
  let extendedKeyUsages: string[] = [];
  const extensions = fields.find((f) => f.tag === TAG.extensions);
  const list = extensions && childrenOf(der, extensions)[0];
  for (const extension of list ? childrenOf(der, list) : []) {
    const parts = childrenOf(der, extension);
    const id = parts[0] && oidText(der, parts[0]);
    const octets = parts[parts.length - 1];
    if (!octets || octets.tag !== TAG.octetString) continue;
    if (id === OID.keyUsage) keyUsages = keyUsagesFrom(der, octets);
    else if (id === OID.extendedKeyUsage) extendedKeyUsages = extendedKeyUsagesFrom(der, octets);
  }
  return { subjectCommonName, keyUsages, extendedKeyUsages };
}
