import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { SeriesRange } from '../edge/metrics/traffic-series.js';
import type { ApiContext } from './context.js';
import { Body } from './schemas.js';

/**
 * `GET /metrics/series`: what the dashboard's charts draw (edge/metrics/traffic-series.ts): this
 * node's HTTP requests per second, status classes, p50/p95/p99 latency and bytes, for one endpoint
 * (its URL, or `other` for those beyond the cap) or in total, over the last hour (10-second
 * buckets) or day (5-minute buckets), and the agents online. Kept in this node's memory only: each
 * node of a cluster answers for its own traffic. An API-only process has no edge and answers
 * `available: false` with empty series.
 * @example await metricsSeriesRoutes(app, ctx);
 */
export async function metricsSeriesRoutes(
  fastify: FastifyInstance,
  ctx: ApiContext,
): Promise<void> {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/metrics/series',
    {
      schema: {
        tags: ['Traffic inspector'],
        summary: "This node's traffic over the last hour or day, per endpoint or in total",
        querystring: Body({
          endpoint: Type.Optional(Type.String({ maxLength: 2048 })),
          range: Type.Optional(Type.Union([Type.Literal('hour'), Type.Literal('day')])),
        }),
      },
    },
    async (request) => {
      const range: SeriesRange = request.query.range ?? 'hour';
      const endpoint = request.query.endpoint || undefined;
      const series = ctx.online.series;
      return {
        available: series !== undefined,
        node_id: ctx.online.nodeId ?? null,
        endpoints: series?.endpointNames() ?? [],
        ...(series
          ? series.read(endpoint, range)
          : { range, endpoint: endpoint ?? null, time: [], totals: null }),
      };
    },
  );
}
