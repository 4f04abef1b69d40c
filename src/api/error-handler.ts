import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  BurrowError,
  CODES,
  NotFoundError,
  RateLimitError,
  UnknownFieldError,
  ValidationError,
} from '../core/errors.js';
import { quote, shorten, spellInvisible } from '../core/quote.js';
import { textProblem, type TextKind } from '../core/text-rules.js';
import { storeError } from './store-errors.js';

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
  /** The keyword's value in the schema (ajv's verbose mode). */
  schema?: unknown;
  parentSchema?: { properties?: Record<string, unknown> };
  /** The value that failed (ajv's verbose mode). */
  data?: unknown;
}

/**
 * `['backend', 'backend_id']` to `backend.backend_id`; `['acl', 0]` to `acl[0]`. Parts can be keys
 * the client chose (unknown fields, map keys), so each is shortened and its invisible characters
 * spelled out.
 */
export function fieldPath(parts: readonly (string | number)[]): string {
  return parts
    .map((p) => spellInvisible(shorten(String(p))))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

/** `/backend/backend_id` to `backend.backend_id`; `/acl/0` to `acl[0]`. */
function fieldName(instancePath: string, extra?: string): string {
  const parts = instancePath
    .split('/')
    .filter(Boolean)
    // JSON Pointer escapes: ~1 is '/', ~0 is '~'.
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (extra !== undefined) parts.push(extra);
  return fieldPath(parts);
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
      const shown = fieldName('', name);
      return new ValidationError(
        CODES.unknownQueryParam,
        shown,
        `The query parameter ${quote(name)} is unknown. Supported parameters are: before_id, limit.`,
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
    case 'plainText': {
      const problem = textProblem(String(e.data), e.schema as TextKind);
      return new ValidationError(
        CODES.invalidValue,
        label,
        problem ?? 'has characters not allowed',
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

/** The most characters of a message; longer ones are cut (see errorBody). */
export const MESSAGE_MAX_CHARS = 1024;
/** The most characters of one `details` value. */
export const DETAIL_MAX_CHARS = 120;
/** Newline and tab stay in messages: multi-line parse errors read better with them. */
const MESSAGE_KEEPS = new Set(['\n', '\t']);

/** `text` with invisible characters spelled out, at most `max` characters (then '…'). */
function bounded(text: string, max: number, keep?: ReadonlySet<string>): string {
  // Cut first so that spelling out works on a bounded string, and again since it lengthens it.
  return shorten(spellInvisible(shorten(text, max), keep), max);
}

/**
 * The error body every failure gets: code, status, message, details with the operation id.
 * Messages quote user input in short form where they are built (quote() in src/core/quote.ts);
 * this is the backstop for any that do not: no message or detail is longer than its cap or holds
 * an invisible character, so no input makes the reply as large as itself or rearranges it.
 */
export function errorBody(err: BurrowError, operationId: string): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (err.code) body.error_code = err.code;
  body.status_code = err.statusCode;
  body.msg = bounded(err.message, MESSAGE_MAX_CHARS, MESSAGE_KEEPS);
  const details: Record<string, string> = {};
  for (const [k, v] of Object.entries(err.details)) details[k] = bounded(v, DETAIL_MAX_CHARS);
  details.operation_id = operationId;
  body.details = details;
  return body;
}

/** Errors Fastify raises before a route's handler runs, by code. */
function frameworkError(err: FastifyError, request: FastifyRequest): BurrowError | undefined {
  const path = request.url.split('?')[0] ?? '';
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
    case 'FST_ERR_CTP_EMPTY_TYPE':
      return new BurrowError(
        CODES.badContentType,
        400,
        'Requests with a body must send Content-Type: application/json.',
      );
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new BurrowError(
        CODES.unreadableBody,
        400,
        'The request body is not as long as its Content-Length header says. Send the exact length, or leave the header out.',
      );
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new BurrowError(
        CODES.unreadableBody,
        413,
        `The request body is too large: the limit is ${request.routeOptions.bodyLimit} bytes (the server's --api-max-body-bytes). Send a smaller body, or split the change into several requests.`,
        { field: 'body', rule: `at most ${request.routeOptions.bodyLimit} bytes` },
      );
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new BurrowError(
        CODES.malformedJson,
        400,
        'The request body is not valid JSON. Send a JSON object, or no body at all.',
      );
    case 'FST_ERR_BAD_URL':
      return new BurrowError(
        CODES.invalidValue,
        400,
        `The request path ${quote(path)} is not a valid URL: it has malformed percent-encoding. Write '%' as %25.`,
      );
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new BurrowError(
        CODES.invalidValue,
        414,
        `The request path ${quote(path)} has a segment longer than 100 characters, more than any id or name in a path can have. Check the URL.`,
      );
  }
  return undefined;
}

function toBurrowError(err: FastifyError, request: FastifyRequest): BurrowError {
  if (err instanceof BurrowError) return err;
  const validation = (err as FastifyError & { validation?: AjvError[]; validationContext?: string })
    .validation;
  if (validation && validation.length > 0) {
    return validationToError(
      validation,
      (err as { validationContext?: string }).validationContext ?? 'body',
    );
  }
  const known = frameworkError(err, request);
  if (known) return known;
  // Disk full, database restarting: 503 with a message, and logged as a 5xx below.
  const store = storeError(err);
  if (store) return store;
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    // Another client error from Fastify or Node (e.g. the client aborted the body): its message is
    // ours to show, and the backstop in errorBody bounds it.
    return new BurrowError(CODES.unreadableBody, err.statusCode, err.message);
  }
  return new BurrowError(
    undefined,
    500,
    'Internal server error. The server log has the details under this operation id.',
  );
}

/**
 * Answer `err` with the Burrow body and the operation-id headers. Used by the error handler and
 * for the errors Fastify raises before any hook runs (frameworkErrors), where the headers the
 * onRequest hook sets are not there yet.
 */
export function sendError(
  err: FastifyError | BurrowError,
  request: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  const burrowErr = toBurrowError(err as FastifyError, request);
  if (burrowErr.statusCode >= 500) request.log.error({ err }, 'request failed');
  const operationId = request.operationId || String(request.id);
  void reply.header('Operation-Id', operationId);
  void reply.header('Ngrok-Operation-Id', operationId);
  if (burrowErr instanceof RateLimitError)
    void reply.header('Retry-After', String(burrowErr.retryAfterSeconds));
  return reply
    .status(burrowErr.statusCode)
    .type('application/json; charset=utf-8')
    .send(errorBody(burrowErr, operationId));
}

/** Install the error and not-found handlers: one body shape for every failure. */
export function installErrorHandlers(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) =>
    sendError(err, request, reply),
  );
  app.setNotFoundHandler((request, reply) =>
    sendError(
      new NotFoundError('Not Found', { path: shorten(request.url.split('?')[0] ?? '') }),
      request,
      reply,
    ),
  );
}
