import { useEffect, useState } from 'react';

/** The pages, in navigation order, with the exact names the navigation shows. */
export const PAGES = [
  { path: 'overview', name: 'Overview' },
  { path: 'agents', name: 'Agents' },
  { path: 'traffic', name: 'Traffic' },
  { path: 'edges', name: 'Edges' },
  { path: 'endpoints', name: 'Endpoints' },
  { path: 'domains', name: 'Reserved domains' },
  { path: 'addresses', name: 'TCP addresses' },
  { path: 'ip-policies', name: 'IP policies' },
  { path: 'backends', name: 'Backends' },
  { path: 'authtokens', name: 'Authtokens' },
  { path: 'ssh-keys', name: 'SSH keys' },
  { path: 'bot-users', name: 'Bot users' },
  { path: 'api-keys', name: 'API keys' },
  { path: 'users', name: 'Users' },
] as const;

export type PagePath = (typeof PAGES)[number]['path'];

/**
 * The current hash route, e.g. `#/agents` → ['agents']. Hash routes never reach the server, so
 * API paths such as /edges stay the API's, and the setup token in `#/setup/<token>` is never sent
 * or logged anywhere.
 */
export function useRoute(): string[] {
  const read = () =>
    window.location.hash
      .replace(/^#\/?/, '')
      .split('/')
      .filter((p) => p !== '');
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function go(path: string): void {
  window.location.hash = `#/${path}`;
}
