import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApi, TEST_BASE_URL, type TestApi } from '../../test/support/api.js';
import { DATABASE_KINDS } from '../../test/support/stores.js';
import type { ConfigTopic } from './context.js';

/**
 * `/event_destinations` and `/event_subscriptions`: CRUD with ngrok's field names, a webhook's
 * signing secret shown once and usable by the edge (stored encrypted), refusals that name the
 * field and the rule, and a change notice to the edge after each write.
 */
describe.each(DATABASE_KINDS)('event destinations and subscriptions API (%s)', (kind) => {
  let api: TestApi;
  const topics: ConfigTopic[] = [];
  beforeAll(async () => {
    api = await createTestApi(kind, {
      online: { tunnelsMatching: () => [], configChanged: (t) => topics.push(t) },
    });
  });
  afterAll(async () => api.close());

  it('creates a webhook destination whose signing secret is shown once and kept usable', async () => {
    const res = await api.call('POST', '/event_destinations', {
      description: 'audit hook',
      target: { webhook: { url: 'https://hooks.example.com/burrow' } },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^ed_/),
      uri: `${TEST_BASE_URL}/event_destinations/${res.body.id}`,
      created_at: expect.any(String),
      description: 'audit hook',
      metadata: '',
      format: 'json',
      target: { webhook: { url: 'https://hooks.example.com/burrow' } },
      signing_secret: expect.stringMatching(/^whsec_/),
    });
    expect(topics.at(-1)).toBe('events');
    const got = await api.call('GET', `/event_destinations/${res.body.id}`);
    expect(got.body.signing_secret).toBeUndefined();
    const list = await api.call('GET', '/event_destinations');
    expect(JSON.stringify(list.body)).not.toContain(res.body.signing_secret);
    // The edge signs with the same secret; the table holds it sealed, never in clear.
    const delivery = (await api.repos.eventDestinations.deliveries()).find(
      (d) => d.id === res.body.id,
    );
    expect(delivery?.signingSecret).toBe(res.body.signing_secret);
    const row = await api.store.db
      .selectFrom('event_destinations')
      .selectAll()
      .where('id', '=', res.body.id)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(res.body.signing_secret);
  });

  it("keeps an OpenTelemetry destination's headers write-only, sealed, and usable by the edge", async () => {
    const res = await api.call('POST', '/event_destinations', {
      target: {
        opentelemetry: {
          url: 'https://otel.example.com/v1/logs',
          headers: { 'x-honeycomb-team': 'hc-api-key-123' },
        },
      },
    });
    expect(res.status).toBe(201);
    expect(res.body.target).toEqual({
      opentelemetry: {
        url: 'https://otel.example.com/v1/logs',
        header_names: ['x-honeycomb-team'],
        // The specification's default, shown so a reader knows what is sent.
        protocol: 'http/protobuf',
      },
    });
    expect(res.body.signing_secret).toBeUndefined();
    const got = await api.call('GET', `/event_destinations/${res.body.id}`);
    expect(JSON.stringify(got.body)).not.toContain('hc-api-key-123');
    const row = await api.store.db
      .selectFrom('event_destinations')
      .selectAll()
      .where('id', '=', res.body.id)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain('hc-api-key-123');
    const delivery = async () =>
      (await api.repos.eventDestinations.deliveries()).find((d) => d.id === res.body.id);
    expect((await delivery())?.target.opentelemetry?.headers).toEqual({
      'x-honeycomb-team': 'hc-api-key-123',
    });
    // A PATCH of the target replaces the headers with the ones it sends.
    const patched = await api.call('PATCH', `/event_destinations/${res.body.id}`, {
      target: {
        opentelemetry: {
          url: 'https://otel.example.com/v1/logs',
          protocol: 'http/json',
          traces_url: 'https://otel.example.com/v1/traces',
        },
      },
    });
    expect(patched.body.target.opentelemetry).toEqual({
      url: 'https://otel.example.com/v1/logs',
      header_names: [],
      protocol: 'http/json',
      traces_url: 'https://otel.example.com/v1/traces',
    });
    expect((await delivery())?.target.opentelemetry).toEqual({
      url: 'https://otel.example.com/v1/logs',
      headers: {},
      protocol: 'http/json',
      traces_url: 'https://otel.example.com/v1/traces',
    });
  });

  it('refuses bad targets naming the field and the rule', async () => {
    const cases: Array<[unknown, string, string]> = [
      [{}, 'target', 'exactly one of webhook, file, opentelemetry'],
      [
        { webhook: { url: 'https://a.example' }, file: { path: '/tmp/x.jsonl' } },
        'target',
        'exactly one',
      ],
      [{ webhook: { url: 'ftp://a.example/' } }, 'target.webhook.url', 'http or https URL'],
      [{ webhook: { url: 'https://u:p@a.example/' } }, 'target.webhook.url', 'user or password'],
      [{ file: { path: 'relative/events.jsonl' } }, 'target.file.path', 'absolute path'],
      [{ file: { path: '/var/log/../../etc/x.jsonl' } }, 'target.file.path', 'absolute path'],
      [{ file: { path: '/home/burrow/.bashrc' } }, 'target.file.path', 'must end in .jsonl'],
      [
        { opentelemetry: { url: 'http://collector:4318/v1/logs', headers: { 'bad name': 'x' } } },
        'target.opentelemetry.headers.bad name',
        'HTTP header name',
      ],
      [
        { opentelemetry: { url: 'http://collector:4318/v1/logs', protocol: 'grpc' } },
        'target.opentelemetry.protocol',
        'must be one of http/protobuf, http/json',
      ],
      [
        { opentelemetry: { url: 'http://collector:4318/v1/logs', traces_url: 'collector' } },
        'target.opentelemetry.traces_url',
        'absolute http or https URL',
      ],
    ];
    for (const [target, field, rule] of cases) {
      const res = await api.call('POST', '/event_destinations', { target });
      expect(res.status, JSON.stringify(target)).toBe(400);
      expect(res.body.details.field).toBe(field);
      expect(res.body.msg).toContain(rule);
    }
    const format = await api.call('POST', '/event_destinations', {
      format: 'xml',
      target: { file: { path: '/tmp/e.jsonl' } },
    });
    expect(format.body.details.field).toBe('format');
  });

  it('keeps a destination to its kind and updates its settings', async () => {
    const made = await api.call('POST', '/event_destinations', {
      target: { file: { path: '/var/log/burrow/a.jsonl' } },
    });
    expect(made.body.signing_secret).toBeUndefined();
    const moved = await api.call('PATCH', `/event_destinations/${made.body.id}`, {
      target: { file: { path: '/var/log/burrow/b.jsonl' } },
    });
    expect(moved.status).toBe(200);
    expect(moved.body.target).toEqual({ file: { path: '/var/log/burrow/b.jsonl' } });
    const kind = await api.call('PATCH', `/event_destinations/${made.body.id}`, {
      target: { webhook: { url: 'https://hooks.example.com/x' } },
    });
    expect(kind.status).toBe(400);
    expect(kind.body.details.field).toBe('target');
    expect(kind.body.msg).toContain('must keep the kind file');
  });

  it('subscribes event types to destinations, checks both, and follows deletes', async () => {
    const dest = await api.call('POST', '/event_destinations', {
      target: { opentelemetry: { url: 'https://otel.example.com/v1/logs' } },
    });
    const sub = await api.call('POST', '/event_subscriptions', {
      description: 'tcp to otel',
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destination_ids: [dest.body.id],
    });
    expect(sub.status).toBe(201);
    expect(sub.body).toMatchObject({
      id: expect.stringMatching(/^esb_/),
      sources: [{ type: 'tcp_connection_closed.v0' }],
      destinations: [{ id: dest.body.id, uri: dest.body.uri }],
    });
    const badType = await api.call('POST', '/event_subscriptions', {
      sources: [{ type: 'http_request_complete.v0' }, { type: 'ip_policy_created.v0' }],
    });
    expect(badType.status).toBe(400);
    expect(badType.body.details.field).toBe('sources[1].type');
    expect(badType.body.msg).toContain('must be one of http_request_complete.v0');
    const badRef = await api.call('POST', '/event_subscriptions', {
      destination_ids: [dest.body.id, 'ed_nothing'],
    });
    expect(badRef.status).toBe(400);
    expect(badRef.body.details.field).toBe('destination_ids[1]');
    // A deleted destination leaves every subscription that named it.
    expect((await api.call('DELETE', `/event_destinations/${dest.body.id}`)).status).toBe(204);
    const after = await api.call('GET', `/event_subscriptions/${sub.body.id}`);
    expect(after.body.destinations).toEqual([]);
    expect((await api.call('DELETE', `/event_subscriptions/${sub.body.id}`)).status).toBe(204);
    expect((await api.call('GET', `/event_subscriptions/${sub.body.id}`)).status).toBe(404);
  });
});
