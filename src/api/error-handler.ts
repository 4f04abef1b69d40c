import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  BurrowError,
  CODES,
  RateLimitError,
  UnknownFieldError,
  ValidationError,
} from '../core/errors.js';

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
  /** The keyword's value in the schema (ajv's verbose mode). */
  schema?: unknown;
  parentSchema?: { properties?: Record<string, unknown> };
}

/** `/backend/backend_id` to `backend.backend_id`; `/acl/0` to `acl[0]`. */
function fieldName(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').filter(Boolean);
  if (extra) parts.push(extra);
  return parts.reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

const BYTE_LIMIT_CODES: Record<string, string> = {
  description: CODES.descriptionTooLong,
  metadata: CODES.metadataTooLong,
};

/** Turn the validator's first complaint into a Burrow error that names the field and the rule. */
export function validationToError(errors: AjvError[], context: string): BurrowError {
  const e = errors[0]!;
  if (e.keyword === 'additionalProperties') {
    const name = String(e.params.additionalProperty);
    if (context === 'querystring') {
      return new ValidationError(
        CODES.unknownQueryParam,
        name,
        `The query parameter '${name}' is unknown. Supported parameters are: before_id, limit.`,
        { sentence: true },
      );
    }
    const field = fieldName(e.instancePath, name);
    return new UnknownFieldError(field, Object.keys(e.parentSchema?.properties ?? {}));
  }
  const field = fieldName(e.instancePath);
  const label = field || context;
  switch (e.keyword) {
    case 'maxBytes': {
      const max = Number(e.schema);
      const leaf = field.split('.').pop() ?? '';
      return new ValidationError(
        BYTE_LIMIT_CODES[leaf] ?? CODES.invalidValue,
        field,
        `must be at most ${max} bytes of UTF-8`,
      );
    }
    case 'required': {
      const missing = fieldName(e.instancePath, String(e.params.missingProperty));
      return new ValidationError(CODES.invalidValue, missing, 'is required');
    }
    case 'type':
      return new ValidationError(
        CODES.invalidValue,
        label,
        `must be ${article(String(e.params.type))}`,
      );
    case 'enum':
      return new ValidationError(
        CODES.invalidValue,
        label,
        `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      );
    default:
      return new ValidationError(
        CODES.invalidValue,
        label,
        e.message ?? `is invalid (${e.keyword})`,
      );
  }
}

function article(type: string): string {
  const names = type
    .split(',')
    .map((t) =>
      t === 'integer'
        ? 'an integer'
        : t === 'object'
          ? 'an object'
          : t === 'array'
            ? 'an array'
            : t === 'null'
              ? 'null'
              : `a ${t}`,
    );
  return names.join(' or ');
}

/** The error body every failure gets: code, status, message, details with the operation id. */
export function errorBody(err: BurrowError, operationId: string): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (err.code) body.error_code = err.code;
  body.status_code = err.statusCode;
  body.msg = err.message;
  body.details = { ...err.details, operation_id: operationId };
  return body;
}

function toBurrowError(err: FastifyError): BurrowError {
  if (err instanceof BurrowError) return err;
  const validation = (err as FastifyError & { validation?: AjvError[]; validationContext?: string })
    .validation;
  if (validation && validation.length > 0) {
    return validationToError(
      validation,
      (err as { validationContext?: string }).validationContext ?? 'body',
    );
  }
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new BurrowError(
        CODES.badContentType,
        400,
        'Requests with a body must send Content-Type: application/json.',
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new BurrowError(
        CODES.unreadableBody,
        413,
        'The request body is too large (limit 1 MiB).',
      );
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new BurrowError(
        CODES.malformedJson,
        400,
        `The request body is not valid JSON: ${err.message}`,
      );
  }
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    return new BurrowError(CODES.unreadableBody, err.statusCode, err.message);
  }
  return new BurrowError(
    undefined,
    500,
    'Internal server error. The server log has the details under this operation id.',
  );
}

/** Install the error and not-found handlers: one body shape for every failure. */
export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const burrowErr = toBurrowError(err);
    if (burrowErr.statusCode >= 500) request.log.error({ err }, 'request failed');
    if (burrowErr instanceof RateLimitError)
      void reply.header('Retry-After', String(burrowErr.retryAfterSeconds));
    return reply.status(burrowErr.statusCode).send(errorBody(burrowErr, request.operationId));
  });
  app.setNotFoundHandler((request, reply) => {
    return reply.status(404).send({
      status_code: 404,
      msg: 'Not Found',
      details: { path: request.url.split('?')[0] ?? '', operation_id: request.operationId },
    });
  });
}
