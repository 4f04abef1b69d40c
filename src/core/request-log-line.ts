/**
 * Local time to the millisecond, as a tunnel's request and status lines start.
 * @example logClock(new Date(2026, 10, 28, 12, 0, 1, 234)) // '12:00:01.234'
 */
export function logClock(now = new Date()): string {
  return `${now.toTimeString().slice(0, 8)}.${String(now.getMilliseconds()).padStart(3, '0')}`;
}

/**
 * One line of a tunnel's request log, as `burrow http` prints it and an SSH tunnel's session
 * shows it on the client's terminal: local time to the millisecond, method, path, status (`---`
 * when there is none), duration.
 * @example requestLogLine({ method: 'GET', path: '/', status: 200, durationMs: 3.2 }) // '12:00:01.234 GET    / 200 3ms'
 */
export function requestLogLine(
  x: { method: string; path: string; status: number | undefined; durationMs: number | undefined },
  now = new Date(),
): string {
  const status = x.status === undefined || x.status === 0 ? '---' : String(x.status);
  return `${logClock(now)} ${x.method.padEnd(6)} ${x.path} ${status} ${Math.round(x.durationMs ?? 0)}ms`;
}
