import type { ReactNode } from 'react';

/** One module of an edge: its name, then its settings or what happens without it. */
export function Module({ title, children }: { title: string; children: ReactNode }) {
  return (
    <div className="module">
      <h3>{title}</h3>
      {children}
    </div>
  );
}
