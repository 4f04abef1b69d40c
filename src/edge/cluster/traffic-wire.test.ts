import { describe, expect, it } from 'vitest';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import { recordFromWire } from './traffic-wire.js';

/** A record as it crosses between nodes: JSON, as the node link sends it. */
function onWire(fields: Record<string, unknown>): unknown {
  const record = { ...trafficRequest('a.test'), id: 'tr_1', seq: 1, credentialsShown: false };
  return JSON.parse(JSON.stringify({ ...record, ...fields })) as unknown;
}

describe('traffic records on the node link', () => {
  it('keeps response headers as the list a node sends', () => {
    const record = recordFromWire(
      onWire({ responseHeaders: ['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2'] }),
      'edge-b',
    );
    expect(record.responseHeaders).toEqual(['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2']);
  });

  it("turns an older node's header object into the list, each value of a repeat in turn", () => {
    const record = recordFromWire(
      onWire({ responseHeaders: { 'set-cookie': ['a=1', 'b=2'], 'content-length': 2 } }),
      'edge-b',
    );
    expect(record.responseHeaders).toEqual([
      ...['set-cookie', 'a=1', 'set-cookie', 'b=2'],
      ...['content-length', '2'],
    ]);
  });

  it('refuses response headers that are neither, naming the node and the field', () => {
    for (const responseHeaders of [['Set-Cookie'], ['X', 1], 'x', { x: { y: 1 } }]) {
      expect(() => recordFromWire(onWire({ responseHeaders }), 'edge-b')).toThrow(
        /edge-b.*responseHeaders/,
      );
    }
  });
});
