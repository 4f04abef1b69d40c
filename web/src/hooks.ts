import { useCallback, useEffect, useState } from 'react';
import { api, errorMessage } from './api';

/**
 * Load something from the API, again every `pollMs` if given, keeping the last error for display.
 * `load` must be stable (module-level or `useCallback`): a new one starts loading anew.
 * @example const detail = useLoad(useCallback(() => api<Detail>('GET', `/traffic/${id}`), [id]));
 */
export function useLoad<T>(load: () => Promise<T>, pollMs?: number) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const reload = useCallback(async () => {
    try {
      setData(await load());
      setError(undefined);
    } catch (err) {
      setError(errorMessage(err));
    }
  }, [load]);
  useEffect(() => {
    void reload();
    if (!pollMs) return undefined;
    const timer = setInterval(() => void reload(), pollMs);
    return () => clearInterval(timer);
  }, [reload, pollMs]);
  return { data, error, reload };
}

/**
 * Load a list from the API: `key` is the list's field in the reply (`keys`, `bot_users`, …).
 * @example const keys = useList<ApiKey>('/api_keys', 'keys');
 */
export function useList<T>(path: string, key: string, pollMs?: number) {
  const load = useCallback(async () => {
    const reply = await api<Record<string, unknown>>('GET', path);
    return (reply[key] as T[] | undefined) ?? [];
  }, [path, key]);
  const { data, error, reload } = useLoad(load, pollMs);
  return { items: data, error, reload };
}

/** Run `action`, keeping its error for display; returns whether it succeeded. */
export function useAction() {
  const [error, setError] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const run = async (action: () => Promise<void>): Promise<boolean> => {
    setBusy(true);
    try {
      await action();
      setError(undefined);
      return true;
    } catch (err) {
      setError(errorMessage(err));
      return false;
    } finally {
      setBusy(false);
    }
  };
  /**
   * One API call through `run`, then `reload` (what the call changed); resolves with the reply, or
   * with undefined when it failed (the error is then kept for display).
   */
  const send = async <R = unknown>(
    method: string,
    path: string,
    body?: unknown,
    reload?: () => Promise<void>,
  ): Promise<R | undefined> => {
    let reply: R | undefined;
    const ok = await run(async () => {
      reply = await api<R>(method, path, body);
      await reload?.();
    });
    return ok ? reply : undefined;
  };
  return { error, busy, run, send, setError };
}

/** What {@link useAction} returns: a page shares one between its form and its delete buttons. */
export type Action = ReturnType<typeof useAction>;

/**
 * A list of one kind of resource with the calls that change it, each reloading the list. Errors of
 * the calls go to `action.error`; pass `action` to share one with another list of the page.
 * @example const bots = useResource<BotUser>('/bot_users', 'bot_users');
 */
export function useResource<T extends { id: string }>(
  path: string,
  key: string,
  options: { pollMs?: number; action?: Action } = {},
) {
  const list = useList<T>(path, key, options.pollMs);
  const own = useAction();
  const action = options.action ?? own;
  return {
    ...list,
    action,
    /** Resolves with the created resource, or undefined if the API refused it. */
    create: (body: object) => action.send<T>('POST', path, body, list.reload),
    update: (item: T, body: object) =>
      action.send('PATCH', `${path}/${item.id}`, body, list.reload),
    remove: (item: T) => action.send('DELETE', `${path}/${item.id}`, undefined, list.reload),
  };
}

/** What {@link useResource} returns. */
export type Resource<T extends { id: string }> = ReturnType<typeof useResource<T>>;

interface Named {
  id: string;
  name: string;
}

/**
 * Who owns a key or an authtoken, by name: the signed-in person ("ada (you)"), a bot user, or
 * another dashboard user (named for admins, who may list users; the id for others).
 */
export function useOwnerName(): (id: string) => string {
  const loadMe = useCallback(
    async () => (await api<{ user: Named }>('GET', '/auth/session')).user,
    [],
  );
  const me = useLoad(loadMe).data;
  const bots = useList<Named>('/bot_users', 'bot_users').items;
  // Refused (403) for anyone but an admin: their owners stay ids.
  const people = useList<Named>('/users', 'users').items;
  return (id) => {
    if (me?.id === id) return `${me.name} (you)`;
    const bot = bots?.find((b) => b.id === id);
    if (bot) return `${bot.name} (bot user)`;
    return people?.find((p) => p.id === id)?.name ?? id;
  };
}
