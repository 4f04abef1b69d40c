import { useEffect, useId, useState } from 'react';
import { api, errorMessage } from './api';

interface Validation {
  valid: boolean;
  error?: { error_code?: string; msg: string };
  location?: {
    phase: string;
    rule?: number;
    rule_name?: string;
    action?: number;
    action_type?: string;
  };
}

/** The state of the document: checking, valid, refused (with where) or unchecked. */
export type PolicyState = 'empty' | 'checking' | 'valid' | 'invalid';

const EXAMPLES: Record<string, string> = {
  tcp: `on_tcp_connect:
  - name: Block one address
    expressions:
      - "conn.client_ip == '192.0.2.1'"
    actions:
      - type: deny`,
  http: `on_http_request:
  - name: Only GET
    expressions:
      - "req.method != 'GET'"
    actions:
      - type: custom-response
        config:
          status_code: 405
          content: Only GET here`,
};

/**
 * A traffic policy editor (JSON or YAML) checked as you type by the server's own engine
 * (POST /traffic_policy/validate), with the engine's message and the phase, rule and action it
 * names. Saving stays with the page; `onState` tells it whether the document is valid.
 * @example <PolicyEditor protocol="tcp" value={text} onChange={setText} onState={setState} />
 */
export function PolicyEditor({
  protocol,
  value,
  onChange,
  onState,
  label = 'Traffic policy (JSON or YAML)',
}: {
  protocol: 'tcp' | 'tls' | 'http' | 'https';
  value: string;
  onChange: (value: string) => void;
  onState?: (state: PolicyState) => void;
  label?: string;
}) {
  const id = useId();
  const [result, setResult] = useState<Validation | undefined>(undefined);
  const [failure, setFailure] = useState<string | undefined>(undefined);
  const [state, setState] = useState<PolicyState>('empty');

  useEffect(() => {
    if (value.trim() === '') {
      setState('empty');
      setResult(undefined);
      return undefined;
    }
    setState('checking');
    // Wait for a pause in typing, then ask the engine; a newer keystroke cancels the answer.
    let current = true;
    const timer = setTimeout(() => {
      api<Validation>('POST', '/traffic_policy/validate', { value, protocol }).then(
        (reply) => {
          if (!current) return;
          setFailure(undefined);
          setResult(reply);
          setState(reply.valid ? 'valid' : 'invalid');
        },
        (err: unknown) => {
          if (!current) return;
          setFailure(errorMessage(err));
          setState('invalid');
        },
      );
    }, 300);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [value, protocol]);

  useEffect(() => onState?.(state), [state, onState]);

  const loc = result?.location;
  const example = EXAMPLES[protocol === 'https' ? 'http' : protocol === 'tls' ? 'tcp' : protocol];
  return (
    <div className="field policy-editor">
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        rows={8}
        spellCheck={false}
        aria-describedby={`${id}-status`}
        aria-invalid={state === 'invalid'}
      />
      <div id={`${id}-status`} className="policy-status" role="status" aria-live="polite">
        {state === 'empty' ? (
          <span className="hint">
            Empty: no policy.{' '}
            {example ? (
              <button type="button" className="link" onClick={() => onChange(example)}>
                Start from an example
              </button>
            ) : null}
          </span>
        ) : null}
        {state === 'checking' ? <span className="hint">Checking…</span> : null}
        {state === 'valid' ? <span className="ok">✓ The engine accepts this policy.</span> : null}
      </div>
      {state === 'invalid' ? (
        <div className="error policy-error" role="alert">
          {loc ? (
            <p className="where">
              In <strong>{loc.phase}</strong>
              {loc.rule !== undefined ? (
                <>
                  {' › '}rule {loc.rule}
                  {loc.rule_name ? ` “${loc.rule_name}”` : ''}
                </>
              ) : null}
              {loc.action !== undefined ? (
                <>
                  {' › '}action {loc.action}
                  {loc.action_type ? ` (${loc.action_type})` : ''}
                </>
              ) : null}
            </p>
          ) : null}
          <p className="engine-message">
            {failure ?? result?.error?.msg}
            {result?.error?.error_code ? ` (${result.error.error_code})` : ''}
          </p>
        </div>
      ) : null}
    </div>
  );
}

/** Why saving must wait for the editor (undefined: save may go ahead); only a policy the engine accepted, or none, is saved. */
export function policyBlocksSave(state: PolicyState): string | undefined {
  if (state === 'invalid') return 'Fix the traffic policy first: the engine refuses it.';
  if (state === 'checking') return 'Checking the traffic policy…';
  return undefined;
}
