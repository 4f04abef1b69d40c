import { useCallback, useEffect, useId, useRef, useState, type ReactNode } from 'react';
import { api, errorMessage } from './api';

/**
 * Load a list from the API: `key` is the list's field in the reply (`keys`, `bot_users`, …).
 * @example const keys = useList<ApiKey>('/api_keys', 'keys');
 */
export function useList<T>(path: string, key: string, pollMs?: number) {
  const [items, setItems] = useState<T[] | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const reload = useCallback(async () => {
    try {
      const reply = await api<Record<string, unknown>>('GET', path);
      setItems((reply[key] as T[] | undefined) ?? []);
      setError(undefined);
    } catch (err) {
      setError(errorMessage(err));
    }
  }, [path, key]);
  useEffect(() => {
    void reload();
    if (!pollMs) return undefined;
    const timer = setInterval(() => void reload(), pollMs);
    return () => clearInterval(timer);
  }, [reload, pollMs]);
  return { items, error, reload };
}

/** An API error, announced to screen readers as it appears. */
export function ErrorMessage({ error }: { error: string | undefined }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {error}
    </p>
  );
}

/** What a page shows when it has nothing yet: what the thing is and what to do next. */
export function EmptyState({ children }: { children: ReactNode }) {
  return <div className="empty">{children}</div>;
}

/** Heading and a sentence on what the page is for. */
export function PageHeader({ title, children }: { title: string; children?: ReactNode }) {
  const ref = useRef<HTMLHeadingElement>(null);
  // Move focus to the new page's heading, so keyboard and screen-reader users know where they are.
  useEffect(() => ref.current?.focus(), []);
  return (
    <header className="page-header">
      <h1 tabIndex={-1} ref={ref}>
        {title}
      </h1>
      {children ? <p className="intro">{children}</p> : null}
    </header>
  );
}

/** A button that copies `text` and says so. */
export function CopyButton({ text, label = 'Copy' }: { text: string; label?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(true);
      setTimeout(() => setCopied(false), 2000);
    } catch {
      // Clipboard refused (an insecure origin, say): the value stays selectable on the page.
      setCopied(false);
    }
  };
  return (
    <button type="button" className="secondary" onClick={() => void copy()} aria-label={label}>
      {copied ? 'Copied' : 'Copy'}
      <span className="visually-hidden" role="status">
        {copied ? 'Copied to the clipboard' : ''}
      </span>
    </button>
  );
}

/** A secret shown once, right after it was created, with a copy button. */
export function ShownOnce({
  what,
  secret,
  onDone,
}: {
  what: string;
  secret: string;
  onDone: () => void;
}) {
  return (
    <section className="shown-once" aria-label={`New ${what}`} role="region">
      <h2>Your new {what}</h2>
      <p>
        Copy it now: it is shown <strong>only this once</strong>. Burrow keeps only its hash, so it
        cannot show it again.
      </p>
      <div className="secret-row">
        <code data-testid="secret">{secret}</code>
        <CopyButton text={secret} label={`Copy the ${what}`} />
      </div>
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </section>
  );
}

/** A labelled form control; `hint` is read out with it. */
export function Field({
  label,
  hint,
  children,
}: {
  label: string;
  hint?: ReactNode;
  children: (props: { id: string; 'aria-describedby'?: string }) => ReactNode;
}) {
  const id = useId();
  const hintId = `${id}-hint`;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {children(hint ? { id, 'aria-describedby': hintId } : { id })}
      {hint ? (
        <p className="hint" id={hintId}>
          {hint}
        </p>
      ) : null}
    </div>
  );
}

/** A delete button that asks once more before deleting. */
export function DeleteButton({ name, onDelete }: { name: string; onDelete: () => Promise<void> }) {
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button
        type="button"
        className="danger"
        onClick={() => setAsking(true)}
        aria-label={`Delete ${name}`}
      >
        Delete
      </button>
    );
  }
  return (
    <span className="confirm">
      <button
        type="button"
        className="danger"
        onClick={() => void onDelete()}
        aria-label={`Really delete ${name}`}
      >
        Really delete
      </button>
      <button type="button" className="secondary" onClick={() => setAsking(false)}>
        Keep
      </button>
    </span>
  );
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
  return { error, busy, run, setError };
}

/** A short date and time in the reader's locale. */
export function When({ iso }: { iso: string }) {
  return <time dateTime={iso}>{new Date(iso).toLocaleString()}</time>;
}
