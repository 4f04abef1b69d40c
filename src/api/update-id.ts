import type { FastifyRequest } from 'fastify';
import { CODES, ValidationError } from '../core/errors.js';
import { quote } from '../core/quote.js';

/**
 * The API reference lists `id` among the parameters of every update, so clients generated from it
 * send the id in the body of `PATCH /things/{id}` as well as in the path. Accept it there when it
 * names the same resource (and drop it before the body is checked against the resource's fields);
 * refuse it, naming the field, when it names another.
 * @example app.addHook('preValidation', async (request) => acceptIdInUpdateBody(request));
 */
export function acceptIdInUpdateBody(request: FastifyRequest): void {
  if (request.method !== 'PATCH') return;
  const body = request.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('id' in body)) return;
  const pathId = (request.params as { id?: unknown } | undefined)?.id;
  if (typeof pathId !== 'string') return;
  const { id, ...rest } = body as Record<string, unknown>;
  if (id !== pathId) {
    throw new ValidationError(
      CODES.invalidValue,
      'id',
      `must be the id in the path (${quote(pathId)}) or left out, not ${quote(String(id))}`,
    );
  }
  request.body = rest;
}
