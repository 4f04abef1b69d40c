/**
 * A minimal writer of MaxMind DB files (the format GeoIP2 databases use, documented at
 * maxmind.github.io/MaxMind-DB), so tests can build a tiny database mapping test ranges
 * (192.0.2.0/24, 198.51.100.0/24, loopback addresses) to records and read it with the real
 * reader (`maxmind`). IPv4 trees only, 32-bit records; values: strings, integers (as uint32 or
 * uint64 by their size), doubles, booleans, lists and maps. No npm package writes this format.
 */

type MmdbValue = string | number | bigint | boolean | MmdbValue[] | { [key: string]: MmdbValue };

/** A network and the record it maps to. */
export interface MmdbEntry {
  cidr: string;
  record: { [key: string]: MmdbValue };
}

const DOUBLE = Symbol('double');
/** A number to write as a double (a plain integer number is written as an unsigned integer). */
export function double(n: number): MmdbValue {
  return Object.assign(Object(n) as object, { [DOUBLE]: true });
}

function control(type: number, size: number): Buffer {
  const extended = type > 7;
  const first = (extended ? 0 : type) << 5;
  let sizeBytes: Buffer;
  let low: number;
  if (size < 29) {
    low = size;
    sizeBytes = Buffer.alloc(0);
  } else if (size < 285) {
    low = 29;
    sizeBytes = Buffer.from([size - 29]);
  } else if (size < 65_821) {
    low = 30;
    sizeBytes = Buffer.alloc(2);
    sizeBytes.writeUInt16BE(size - 285);
  } else {
    low = 31;
    const v = size - 65_821;
    sizeBytes = Buffer.from([(v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff]);
  }
  const head = extended ? Buffer.from([first | low, type - 7]) : Buffer.from([first | low]);
  return Buffer.concat([head, sizeBytes]);
}

function unsigned(value: bigint): Buffer {
  const bytes: number[] = [];
  for (let v = value; v > 0n; v >>= 8n) bytes.unshift(Number(v & 0xffn));
  return Buffer.from(bytes);
}

/** One value in the data section's encoding. */
export function encodeValue(value: MmdbValue): Buffer {
  if (typeof value === 'object' && value !== null && DOUBLE in value) {
    const b = Buffer.alloc(8);
    b.writeDoubleBE(Number(value));
    return Buffer.concat([control(3, 8), b]);
  }
  if (typeof value === 'string') {
    const b = Buffer.from(value, 'utf8');
    return Buffer.concat([control(2, b.length), b]);
  }
  if (typeof value === 'boolean') return control(14, value ? 1 : 0);
  if (typeof value === 'number' || typeof value === 'bigint') {
    const n = BigInt(value);
    const b = unsigned(n);
    return Buffer.concat([control(n < 2n ** 32n ? 6 : 9, b.length), b]);
  }
  if (Array.isArray(value)) {
    return Buffer.concat([control(11, value.length), ...value.map(encodeValue)]);
  }
  const entries = Object.entries(value);
  return Buffer.concat([
    control(7, entries.length),
    ...entries.flatMap(([k, v]) => [encodeValue(k), encodeValue(v)]),
  ]);
}

type Slot = { node: number } | { data: number } | null;

function ipv4Bits(address: string): number {
  const parts = address.split('.').map(Number);
  return ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
}

/**
 * The bytes of a MaxMind DB of `databaseType` mapping each entry's network to its record (a
 * network inside an earlier one is not supported: give them disjoint).
 * @example writeMmdb('GeoLite2-City', [{ cidr: '192.0.2.0/24', record: { country: { iso_code: 'FR' } } }])
 */
export function writeMmdb(databaseType: string, entries: readonly MmdbEntry[]): Buffer {
  const nodes: Array<[Slot, Slot]> = [[null, null]];
  const data: Buffer[] = [];
  for (const [index, entry] of entries.entries()) {
    const [address, prefixText] = entry.cidr.split('/');
    const prefix = Number(prefixText ?? 32);
    const bits = ipv4Bits(address!);
    data.push(encodeValue(entry.record));
    let node = 0;
    for (let i = 0; i < prefix; i++) {
      const bit = (bits >>> (31 - i)) & 1;
      if (i === prefix - 1) {
        nodes[node]![bit] = { data: index };
        break;
      }
      const slot = nodes[node]![bit];
      if (slot && 'node' in slot) {
        node = slot.node;
      } else {
        nodes.push([null, null]);
        nodes[node]![bit] = { node: nodes.length - 1 };
        node = nodes.length - 1;
      }
    }
  }
  const offsets: number[] = [];
  let offset = 0;
  for (const d of data) {
    offsets.push(offset);
    offset += d.length;
  }
  const n = nodes.length;
  const tree = Buffer.alloc(n * 8);
  nodes.forEach(([left, right], i) => {
    for (const [j, slot] of [left, right].entries()) {
      const value = slot === null ? n : 'node' in slot ? slot.node : n + 16 + offsets[slot.data]!;
      tree.writeUInt32BE(value, i * 8 + j * 4);
    }
  });
  const metadata = encodeValue({
    node_count: n,
    record_size: 32,
    ip_version: 4,
    database_type: databaseType,
    languages: ['en'],
    binary_format_major_version: 2,
    binary_format_minor_version: 0,
    build_epoch: BigInt(Math.floor(Date.now() / 1000)),
    description: { en: 'Burrow test database' },
  });
  return Buffer.concat([
    tree,
    Buffer.alloc(16),
    ...data,
    Buffer.from([0xab, 0xcd, 0xef]),
    Buffer.from('MaxMind.com', 'ascii'),
    metadata,
  ]);
}
