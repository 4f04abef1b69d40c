import { describe, expect, it } from 'vitest';
import { Meter, RequestLog, splitMessage } from './request-log.js';

const exchange = (path: string, body = '') => {
  const request = Buffer.from(
    `POST ${path} HTTP/1.1\r\ncontent-type: text/plain\r\nx-a: 1\r\nX-A: 2\r\n\r\n${body}`,
  );
  const response = Buffer.from('HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n');
  return {
    method: 'POST',
    path,
    status: 201,
    durationMs: 2.5,
    clientAddr: '[2001:db8::1]:4000',
    request: { raw: request, size: request.length },
    response: { raw: response, size: response.length },
  };
};

describe('RequestLog', () => {
  it("shows an exchange in ngrok's shape: canonical header names, status text, nanoseconds", () => {
    const log = new RequestLog();
    const added = log.add('web', exchange('/a', 'hi'))!;
    expect(added).toMatchObject({
      uri: `/api/requests/http/${added.id}`,
      tunnel_name: 'web',
      remote_addr: '2001:db8::1',
      duration: 2_500_000,
      request: {
        method: 'POST',
        uri: '/a',
        proto: 'HTTP/1.1',
        headers: { 'Content-Type': ['text/plain'], 'X-A': ['1', '2'] },
        truncated: false,
      },
      response: { status: '201 Created', status_code: 201 },
    });
    expect(splitMessage(Buffer.from(added.request.raw, 'base64')).body.toString()).toBe('hi');
  });

  it('keeps the newest within its byte budget, lists by tunnel and limit, clears', () => {
    const log = new RequestLog(4000);
    for (let i = 0; i < 20; i++) log.add(i % 2 === 0 ? 'even' : 'odd', exchange(`/${i}`));
    const all = log.list(undefined, undefined);
    expect(all.length).toBeLessThan(20);
    expect(all[0]!.request.uri).toBe('/19');
    expect(log.list(2, 'even').map((r) => r.request.uri)).toEqual(['/18', '/16']);
    expect(log.get(all[0]!.id)).toBe(all[0]);
    log.clear();
    expect(log.list(undefined, undefined)).toEqual([]);
  });

  it('does not record an exchange without captured bytes', () => {
    const { request: _r, response: _s, ...bare } = exchange('/x');
    expect(new RequestLog().add('web', bare)).toBeUndefined();
  });
});

describe('Meter', () => {
  it('counts, rates per second over 1, 5 and 15 minutes, percentiles in nanoseconds', () => {
    const meter = new Meter();
    const now = 1_000_000_000;
    for (let i = 1; i <= 100; i++) meter.record(i, now - 1000);
    meter.record(500, now - 10 * 60_000);
    const view = meter.view(now);
    expect(view.count).toBe(101);
    expect(view.rate1).toBeCloseTo(100 / 60);
    expect(view.rate15).toBeCloseTo(101 / 900);
    expect(view.p50).toBe(51_000_000); // nearest rank over 101 samples
    expect(view.p99).toBe(100_000_000);
    expect(meter.view(now + 20 * 60_000)).toMatchObject({ count: 101, rate15: 0, p50: 0 });
  });
});
