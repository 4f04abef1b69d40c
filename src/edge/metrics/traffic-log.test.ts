import { describe, expect, it } from 'vitest';
import { trafficRequest as record } from '../../../test/support/traffic-records.js';
import { BODY_CAP, BodyBuffer, HOST_CAP, PER_HOST_CAP, TrafficLog } from './traffic-log.js';

describe('TrafficLog', () => {
  it('keeps a fixed number of requests per host and of hosts', () => {
    const log = new TrafficLog();
    for (let i = 0; i < PER_HOST_CAP + 10; i++) log.add(record('a.test'));
    expect(log.list({ host: 'a.test', limit: 1000 })).toHaveLength(PER_HOST_CAP);
    for (let i = 0; i < HOST_CAP + 5; i++) log.add(record(`h${i}.test`));
    expect(log.hosts()).toHaveLength(HOST_CAP);
    expect(log.hosts()).not.toContain('a.test');
  });

  it('keeps exactly the last requests of a host, however many went before (oldest dropped)', () => {
    const log = new TrafficLog();
    const added = [];
    // Past the cap several times over, so that the dropped ones are cleared out more than once.
    for (let i = 0; i < PER_HOST_CAP * 3 + 7; i++) {
      added.push(log.add(record('a.test')));
      const kept = added.slice(-PER_HOST_CAP);
      if (i % 37 !== 0 && i < PER_HOST_CAP * 3) continue;
      expect(log.list({ host: 'a.test', limit: 1000 })).toEqual(kept.reverse());
    }
    const dropped = added[added.length - PER_HOST_CAP - 1]!;
    expect(log.get(dropped.id)).toBeUndefined();
    expect(log.get(added[added.length - PER_HOST_CAP]!.id)).toBe(
      added[added.length - PER_HOST_CAP],
    );
  });

  it('lists newest first after a cursor and finds by id', () => {
    const log = new TrafficLog();
    const first = log.add(record('a.test'));
    const second = log.add(record('a.test'));
    expect(log.list({}).map((r) => r.id)).toEqual([second.id, first.id]);
    expect(log.list({ afterSeq: first.seq }).map((r) => r.id)).toEqual([second.id]);
    expect(log.get(first.id)).toBe(first);
    expect(log.get('tr_999')).toBeUndefined();
  });

  it('redacts both ways as the request was recorded, even if its host changes mid-flight', () => {
    const log = new TrafficLog({ redactHeaders: ['X-Api-Key'] });
    const withCredentials = record('a.test', {
      requestHeaders: ['Authorization', 'Bearer secret', 'X-Api-Key', 'secret'],
    });
    const answer = {
      status: 200,
      responseHeaders: ['Set-Cookie', 'sid=secret'],
      durationMs: 1,
      requestBody: undefined,
      responseBody: undefined,
    };
    const redacted = log.add(withCredentials);
    log.setCredentialsShown('A.test', true);
    log.answer(redacted, answer);
    expect(redacted.credentialsShown).toBe(false);
    expect(JSON.stringify(redacted)).not.toContain('secret');

    const shown = log.add(withCredentials);
    log.setCredentialsShown('a.test', false);
    log.answer(shown, answer);
    expect(shown.credentialsShown).toBe(true);
    expect(shown.requestHeaders).toEqual(withCredentials.requestHeaders);
    expect(shown.responseHeaders).toEqual(['Set-Cookie', 'sid=secret']);
    expect(log.credentialsShownHosts()).toEqual([]);
  });

  it('caps captured bodies', () => {
    const body = new BodyBuffer();
    body.add(Buffer.alloc(BODY_CAP - 1));
    body.add(Buffer.alloc(10));
    const done = body.done();
    expect(done.bytes.length).toBe(BODY_CAP);
    expect(done.size).toBe(BODY_CAP + 9);
    expect(done.truncated).toBe(true);
  });
});
