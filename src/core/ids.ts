import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const BODY_LENGTH = 27;
const BODY_RE = /^[0-9A-Za-z]{27}$/;

/** Every id prefix Burrow issues, by resource. */
export const ID_PREFIX = {
  apiKey: 'ak',
  botUser: 'bot',
  credential: 'cr',
  sshCredential: 'sshcr',
  reservedDomain: 'rd',
  reservedAddr: 'ra',
  ipPolicy: 'ipp',
  ipPolicyRule: 'ipr',
  tunnelGroupBackend: 'bkdtg',
  failoverBackend: 'bkdfo',
  weightedBackend: 'bkdwd',
  staticBackend: 'bkdsc',
  tcpEdge: 'edgtcp',
  tlsEdge: 'edgtls',
  certificateAuthority: 'ca',
  tlsCertificate: 'cert',
  acmeChallenge: 'acmch',
  user: 'usr',
  tunnelSession: 'ts',
  tunnel: 'tn',
  endpoint: 'ep',
  operation: 'op',
  auditEvent: 'aud',
  vault: 'vault',
  secret: 'sec',
  eventDestination: 'ed',
  eventSubscription: 'esb',
} as const;

export type IdPrefix = (typeof ID_PREFIX)[keyof typeof ID_PREFIX];

let lastMillis = 0n;
let lastRandom = 0n;
const RANDOM_BITS = 112n;
const RANDOM_MAX = (1n << RANDOM_BITS) - 1n;

function encodeBase62(value: bigint, width: number): string {
  let out = '';
  let v = value;
  while (v > 0n) {
    out = ALPHABET[Number(v % 62n)]! + out;
    v /= 62n;
  }
  return out.padStart(width, '0');
}

/**
 * A new id body: 48 bits of milliseconds then 112 random bits, base62 to 27 characters.
 * Ids made later sort after earlier ones (byte order), even within one millisecond in one
 * process, which is what `before_id` paging relies on.
 */
export function newIdBody(now = Date.now()): string {
  const millis = BigInt(now);
  let random: bigint;
  if (millis <= lastMillis && lastRandom < RANDOM_MAX) {
    random = lastRandom + 1n;
  } else {
    random = BigInt('0x' + randomBytes(14).toString('hex')) >> 1n; // leave room to increment
  }
  lastMillis = millis > lastMillis ? millis : lastMillis;
  lastRandom = random;
  return encodeBase62((lastMillis << RANDOM_BITS) | random, BODY_LENGTH);
}

/**
 * A new resource id such as `edgtcp_32ELI23DHprIRKfgbhhOlEu9Sb7`.
 * @example newId(ID_PREFIX.tcpEdge) // 'edgtcp_...'
 */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${newIdBody()}`;
}

/** True when `id` has the given prefix and a well-formed body. */
export function isId(id: string, prefix: IdPrefix): boolean {
  return id.startsWith(prefix + '_') && BODY_RE.test(id.slice(prefix.length + 1));
}

/** Random base62 text of the given length, for token secrets and names. */
export function randomBase62(length: number): string {
  const bytes = randomBytes(length * 2);
  let out = '';
  for (let i = 0; out.length < length && i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b < 248) out += ALPHABET[b % 62];
  }
  return out.length === length ? out : out + randomBase62(length - out.length);
}

/** Random lowercase letters and digits, for DNS labels. */
export function randomDnsLabel(length: number): string {
  return randomBase62(length * 2)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '')
    .slice(0, length)
    .padEnd(length, '0');
}
