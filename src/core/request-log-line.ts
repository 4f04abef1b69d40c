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
  const time = `${now.toTimeString().slice(0, 8)}.${String(now.getMilliseconds()).padStart(3, '0')}`;
  const status = x.status === undefined || x.status === 0 ? '---' : String(x.status);
  return `${time} ${x.method.padEnd(6)} ${x.path} ${status} ${Math.round(x.durationMs ?? 0)}ms`;
}
