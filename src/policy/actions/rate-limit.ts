import { quote, shorten } from '../../core/quote.js';
import { SlidingWindowLimiter } from '../../core/sliding-window.js';
import type { CompiledExpression } from '../cel.js';
import { celToString } from '../cel-types.js';
import type { ConfigReader } from './config.js';
import type { ActionSpec, CompiledAction } from './types.js';

function readRate(config: ConfigReader): number {
  const ms = config.duration('rate', {
    min: 60_000,
    max: 86_400_000,
    range: '60s to 24h',
    example: '"60s", "5m" or "1h"',
    required: true,
  })!;
  if (ms % 10_000 !== 0) {
    config.fail('rate', `must be a multiple of 10s, not ${shorten(config.string('rate')!)}`);
  }
  return ms;
}

/**
 * `rate-limit`: allow at most `capacity` requests per `rate` window (a sliding window) for each
 * bucket, where the bucket is the values of the `bucket_key` expressions (e.g. `conn.client_ip`;
 * none: one bucket for the endpoint). Over the limit: 429 with `retry-after` (seconds). With
 * `enforce: false` it only records what it would have refused. Counters live in the binding, so
 * two endpoints with the same policy count separately.
 * @example { type: 'rate-limit', config: { name: 'per ip', algorithm: 'sliding_window', capacity: 30, rate: '60s', bucket_key: ['conn.client_ip'] } }
 */
export const rateLimitAction: ActionSpec = {
  type: 'rate-limit',
  phases: ['on_http_request'],
  termination: 'conditionally',
  configKeys: ['name', 'algorithm', 'capacity', 'rate', 'bucket_key', 'enforce'],
  compile(config, ctx) {
    const name = config.string('name') ?? 'rate-limit';
    const algorithm = config.string('algorithm') ?? 'sliding_window';
    if (algorithm !== 'sliding_window') {
      config.fail(
        'algorithm',
        `must be "sliding_window" (the only algorithm), not ${quote(String(algorithm), '"')}`,
      );
    }
    const capacity = config.integer('capacity', { min: 1, max: 2_000_000_000, required: true })!;
    const windowMs = readRate(config);
    const keys: CompiledExpression[] = (
      config.stringList('bucket_key', { min: 0, max: 10 }) ?? []
    ).map((source, i) => ctx.expression(source, `bucket_key[${i}]`, 'value'));
    const enforce = config.boolean('enforce') ?? true;
    const action: CompiledAction = {
      alwaysTerminates: false,
      run(c) {
        const limiter = c.state(action, () => new SlidingWindowLimiter(capacity, windowMs));
        let bucket = '';
        for (let i = 0; i < keys.length; i++) {
          if (i > 0) bucket += '\u0000';
          bucket += celToString(c.value(keys[i]!));
        }
        const { allowed, retryAfterMs } = limiter.take(bucket, c.now());
        c.setActionResult('rate_limit', {
          bucket_key: bucket.replaceAll('\u0000', ' '),
          limited: !allowed,
        });
        if (allowed) return undefined;
        const retryAfter = Math.max(1, Math.ceil(retryAfterMs / 1000));
        const details = {
          name,
          bucket: bucket.replaceAll('\u0000', ' '),
          capacity,
          retry_after: retryAfter,
        };
        if (!enforce) {
          c.event(
            'would-rate-limit',
            `${name}: over ${capacity} per ${windowMs / 1000}s (enforce is false: let through)`,
            details,
          );
          return undefined;
        }
        c.event(
          'rate-limited',
          `${name}: over ${capacity} per ${windowMs / 1000}s; retry after ${retryAfter}s`,
          details,
        );
        return {
          kind: 'respond',
          status: 429,
          headers: { 'retry-after': String(retryAfter) },
          body: '',
        };
      },
    };
    return action;
  },
};
