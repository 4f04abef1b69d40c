import { useEffect, useRef, useState, type ReactNode } from 'react';
import { useCanChange } from './role';

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

/**
 * A button for something that cannot be undone (delete, stop an agent): the first click asks
 * once more, with the verb and what it applies to, and "Keep" takes it back.
 */
export function ConfirmButton({
  verb,
  name,
  onConfirm,
  className = 'danger',
}: {
  /** The button's text, e.g. "Delete" or "Stop". */
  verb: string;
  /** What it applies to, in the accessible names: "Delete API key CI". */
  name: string;
  onConfirm: () => Promise<unknown>;
  className?: string;
}) {
  const [asking, setAsking] = useState(false);
  // A change the signed-in person's role cannot make is not offered (the API would refuse it).
  if (!useCanChange()) return null;
  if (!asking) {
    return (
      <button
        type="button"
        className={className}
        onClick={() => setAsking(true)}
        aria-label={`${verb} ${name}`}
      >
        {verb}
      </button>
    );
  }
  const really = `Really ${verb.toLowerCase()}`;
  return (
    <span className="confirm">
      <button
        type="button"
        className="danger"
        onClick={() => void onConfirm()}
        aria-label={`${really} ${name}`}
      >
        {really}
      </button>
      <button type="button" className="secondary" onClick={() => setAsking(false)}>
        Keep
      </button>
    </span>
  );
}

/** A delete button that asks once more before deleting. */
export function DeleteButton({
  name,
  onDelete,
}: {
  name: string;
  onDelete: () => Promise<unknown>;
}) {
  return <ConfirmButton verb="Delete" name={name} onConfirm={onDelete} />;
}

/** A short date and time in the reader's locale. */
export function When({ iso }: { iso: string }) {
  return <time dateTime={iso}>{new Date(iso).toLocaleString()}</time>;
}

/** Short values (labels, rules, host:ports) as a row of chips. */
export function Chips({ values }: { values: string[] }) {
  return (
    <>
      {values.map((v) => (
        <code key={v} className="chip">
          {v}
        </code>
      ))}
    </>
  );
}

/** Labels as `key=value` strings, the way agents are given them (`--label app=ssh`). */
export function labelPairs(labels: Record<string, string>): string[] {
  return Object.entries(labels).map(([k, v]) => `${k}=${v}`);
}
