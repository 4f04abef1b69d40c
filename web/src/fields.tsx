import { useId, type FormEvent, type InputHTMLAttributes, type ReactNode } from 'react';
import { useCanChange } from './role';
import { ErrorMessage } from './components';

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

/**
 * A labelled text input; other input attributes (`required`, `maxLength`, `type`, …) pass through.
 * @example <TextField label="Name" value={name} onChange={setName} required />
 */
export function TextField({
  label,
  hint,
  value,
  onChange,
  ...rest
}: {
  label: string;
  hint?: ReactNode;
  value: string;
  onChange: (value: string) => void;
} & Omit<InputHTMLAttributes<HTMLInputElement>, 'value' | 'onChange' | 'id'>) {
  return (
    <Field label={label} hint={hint}>
      {(p) => <input {...p} value={value} onChange={(e) => onChange(e.target.value)} {...rest} />}
    </Field>
  );
}

/** A labelled drop-down; `children` are its options. */
export function SelectField({
  label,
  hint,
  value,
  onChange,
  children,
}: {
  label: string;
  hint?: ReactNode;
  value: string;
  onChange: (value: string) => void;
  children: ReactNode;
}) {
  return (
    <Field label={label} hint={hint}>
      {(p) => (
        <select {...p} value={value} onChange={(e) => onChange(e.target.value)}>
          {children}
        </select>
      )}
    </Field>
  );
}

/** A checkbox inside its label (so the whole label toggles it); `children` are the label. */
export function Checkbox({
  className = 'check',
  checked,
  onChange,
  children,
}: {
  className?: string;
  checked: boolean;
  onChange: (checked: boolean) => void;
  children: ReactNode;
}) {
  return (
    <label className={className}>
      <input type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} />
      {children}
    </label>
  );
}

/**
 * The shell of a form that creates something: its fields (`children`), the submit button, why
 * submitting is not possible yet (`blocked`), and the error of the last attempt.
 * @example <CreateForm label="Create a bot user" submit="Create bot user" action={bots.action} onSubmit={create}>…</CreateForm>
 */
export function CreateForm({
  label,
  submit,
  action,
  onSubmit,
  className = 'card inline-form',
  title,
  blocked,
  children,
}: {
  /** The form's accessible name. */
  label: string;
  /** The submit button's text. */
  submit: string;
  action: { busy: boolean; error: string | undefined };
  onSubmit: () => Promise<unknown>;
  className?: string;
  /** A visible heading, for the larger forms. */
  title?: string;
  blocked?: string;
  children: ReactNode;
}) {
  const canChange = useCanChange();
  const submitted = (e: FormEvent) => {
    e.preventDefault();
    void onSubmit();
  };
  // A create the signed-in person's role cannot make is not offered (the API would refuse it).
  if (!canChange) return null;
  return (
    <form className={className} onSubmit={submitted} aria-label={label}>
      {title ? <h2>{title}</h2> : null}
      {children}
      <button type="submit" disabled={action.busy || blocked !== undefined}>
        {submit}
      </button>
      {blocked ? <p className="hint">{blocked}</p> : null}
      <ErrorMessage error={action.error} />
    </form>
  );
}

/**
 * Save and cancel buttons of something being edited (and `remove`, when given), why saving is not
 * possible yet (`blocked`, which also disables Save), and the error of the last save. Save calls
 * `save.run`, or, without one, submits its form.
 * @example <EditActions save={{ text: 'Save endpoint' }} cancel={onClose} busy={action.busy} error={action.error} blocked={blocked} />
 */
export function EditActions({
  save,
  cancel,
  busy,
  error,
  remove,
  blocked,
}: {
  save: { text: string; run?: () => Promise<void> };
  cancel: () => void;
  busy: boolean;
  error: string | undefined;
  remove?: { text: string; run: () => Promise<void> };
  blocked?: string | undefined;
}) {
  const run = save.run;
  return (
    <>
      <div className="actions">
        <button
          type={run ? 'button' : 'submit'}
          onClick={run ? () => void run() : undefined}
          disabled={busy || blocked !== undefined}
        >
          {save.text}
        </button>
        {remove ? (
          <button
            type="button"
            className="danger"
            onClick={() => void remove.run()}
            disabled={busy}
          >
            {remove.text}
          </button>
        ) : null}
        <button type="button" className="secondary" onClick={cancel}>
          Cancel
        </button>
      </div>
      {blocked ? <p className="hint">{blocked}</p> : null}
      <ErrorMessage error={error} />
    </>
  );
}
