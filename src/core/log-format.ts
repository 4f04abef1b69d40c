import type { DestinationStream } from 'pino';
import pretty from 'pino-pretty';

/**
 * Where `burrow server` writes its log: readable, coloured lines (pino-pretty) when a person
 * watches a terminal, JSON lines (the default destination, undefined here) for anything that
 * reads a pipe or file, or when asked for with `--log-format json`.
 * @example createLogger(config.logLevel, logDestination(config.logFormat, process.stdout.isTTY))
 */
export function logDestination(
  format: 'auto' | 'json' | 'pretty',
  isTty: boolean | undefined,
): DestinationStream | undefined {
  if (format === 'json' || (format === 'auto' && isTty !== true)) return undefined;
  return pretty({
    colorize: isTty === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    // Synchronous, like pino's default destination, so nothing is lost when the process exits.
    sync: true,
  });
}
