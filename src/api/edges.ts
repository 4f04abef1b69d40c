import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';

/** PLACEHOLDER: being written. */
export async function edgeRoutes(_app: FastifyInstance, _ctx: ApiContext): Promise<void> {}
