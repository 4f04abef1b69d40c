import { afterEach, describe, expect, it } from 'vitest';
import { trafficRequest } from '../../../test/support/traffic-records.js';
import { configureIpIntelligence } from '../../policy/index.js';
import { TrafficLog } from '../metrics/traffic-log.js';
import { httpRequestEvent } from './traffic-events.js';

describe('traffic events', () => {
  afterEach(() => configureIpIntelligence(undefined));

  it("carry what IP intelligence knows of the client, under ngrok's variable names", () => {
    configureIpIntelligence({
      lookup: (ip) => (ip === '192.0.2.7' ? { country_code: 'FR', as_number: 64500 } : undefined),
    });
    const log = new TrafficLog();
    const known = httpRequestEvent(
      log.add(trafficRequest('app.example.com', { clientIp: '192.0.2.7', status: 200 })),
    );
    expect(known.object).toMatchObject({
      'conn.client_ip': '192.0.2.7',
      'conn.client_ip.geo.location.country_code': 'FR',
      'conn.client_ip.as.number': 64500,
      'http.response.status_code': 200,
    });
    const unknown = httpRequestEvent(
      log.add(trafficRequest('app.example.com', { clientIp: '198.51.100.9' })),
    );
    expect(
      Object.keys(unknown.object).filter((k) => k.includes('.geo.') || k.includes('.as.')),
    ).toEqual([]);
  });
});
