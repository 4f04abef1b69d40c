import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../core/logger.js';
import { PolicyEventLog, PolicyEventRing, type PolicyEvent } from './events.js';

const event = (owner: string, n: number, outcome: PolicyEvent['outcome'] = 'log'): PolicyEvent => ({
  timestamp: new Date(n * 1000).toISOString(),
  owner_id: owner,
  phase: 'on_tcp_connect',
  rule: { index: 0, name: null },
  action: { index: 0, type: 'log' },
  outcome,
  message: `event ${n}`,
  client_ip: '192.0.2.1',
  metadata: null,
});

const messages = (events: readonly PolicyEvent[]) => events.map((e) => e.message);

describe('PolicyEventRing', () => {
  it('lists newest first and overwrites the oldest past capacity', () => {
    const ring = new PolicyEventRing(3);
    expect(ring.list()).toEqual([]);
    for (let n = 1; n <= 5; n++) ring.push(event('o', n));
    expect(messages(ring.list())).toEqual(['event 5', 'event 4', 'event 3']);
  });

  it('refuses a capacity below one', () => {
    expect(() => new PolicyEventRing(0)).toThrow(RangeError);
  });
});

describe('PolicyEventLog', () => {
  it('keeps a bounded ring per owner', () => {
    const log = new PolicyEventLog({ perOwner: 2 });
    for (let n = 1; n <= 3; n++) log.record(event('a', n));
    log.record(event('b', 9));
    expect(messages(log.eventsFor('a'))).toEqual(['event 3', 'event 2']);
    expect(messages(log.eventsFor('b'))).toEqual(['event 9']);
    expect(log.eventsFor('nobody')).toEqual([]);
    log.forget('a');
    expect(log.eventsFor('a')).toEqual([]);
  });

  it('forgets the owner idle longest when there are too many', () => {
    const log = new PolicyEventLog({ maxOwners: 2 });
    log.record(event('a', 1));
    log.record(event('b', 2));
    log.record(event('a', 3));
    log.record(event('c', 4));
    expect(log.eventsFor('b')).toEqual([]);
    expect(messages(log.eventsFor('a'))).toEqual(['event 3', 'event 1']);
    expect(messages(log.eventsFor('c'))).toEqual(['event 4']);
  });

  it('writes each event to the structured log: info, or warn for errors', () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const log = new PolicyEventLog({ logger: createLogger('info', sink) });
    log.record(event('edgtcp_1', 1));
    log.record(event('edgtcp_1', 2, 'error'));
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      level: 30,
      msg: 'traffic policy log: event 1',
      policy_event: { owner_id: 'edgtcp_1' },
    });
    expect(lines[1]).toMatchObject({ level: 40, msg: 'traffic policy error: event 2' });
  });
});
