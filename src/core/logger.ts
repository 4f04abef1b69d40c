import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths pino blanks out in every log line: credentials in headers, bodies and agent messages.
 * Tokens must never reach a log, whatever the level. Nothing logs request bodies; `body.value`
 * (a secret's value on `/secrets`) is listed in case something ever does.
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'headers.authorization',
  'authorization',
  'token',
  'authtoken',
  '*.token',
  '*.authtoken',
  '*.Authtoken',
  '*.AuthToken',
  'extra.Authtoken',
  'extra.AuthToken',
  'body.value',
  'req.body.value',
];

/**
 * The structured JSON logger every component uses.
 * @example createLogger('info').info({ port: 4000 }, 'api listening')
 */
export function createLogger(level = 'info', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'burrow' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}
