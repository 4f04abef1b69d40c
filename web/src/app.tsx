import { useCallback, useEffect, useId, useState, type ReactNode } from 'react';
import { api, errorMessage, setCsrfToken, setSignedOutHandler } from './api';
import { ErrorMessage } from './components';
import { TextField } from './fields';
import { go, PAGES, useRoute, type PagePath } from './routes';
import { AgentsPage } from './pages/agents';
import { ApiKeysPage } from './pages/api-keys';
import { AuthtokensPage } from './pages/authtokens';
import { SshKeysPage } from './pages/ssh-keys';
import { BackendsPage } from './pages/backends';
import { BotUsersPage } from './pages/bot-users';
import { DomainsPage } from './pages/domains';
import { EdgesPage } from './pages/edges';
import { EndpointsPage } from './pages/endpoints';
import { IpPoliciesPage } from './pages/ip-policies';
import { OverviewPage } from './pages/overview';
import { AddressesPage } from './pages/addresses';
import { TrafficPage } from './pages/traffic';
import { UsersPage } from './pages/users';
import { CanChangeContext, canChangePage, seesPage, type Role } from './role';

interface Session {
  user: { id: string; name: string; role: Role };
  csrf_token: string;
  expires_at: string;
}

const PAGE_COMPONENTS: Record<PagePath, () => React.JSX.Element> = {
  overview: OverviewPage,
  agents: AgentsPage,
  traffic: TrafficPage,
  edges: EdgesPage,
  endpoints: EndpointsPage,
  domains: DomainsPage,
  addresses: AddressesPage,
  'ip-policies': IpPoliciesPage,
  backends: BackendsPage,
  authtokens: AuthtokensPage,
  'ssh-keys': SshKeysPage,
  'bot-users': BotUsersPage,
  'api-keys': ApiKeysPage,
  users: UsersPage,
};

/** The dashboard: sign-in (or first-user setup), then the pages behind the navigation. */
export function App() {
  const route = useRoute();
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const signedIn = useCallback((s: Session | null) => {
    setCsrfToken(s?.csrf_token ?? '');
    setSession(s);
  }, []);

  useEffect(() => {
    setSignedOutHandler(() => signedIn(null));
    api<Session>('GET', '/auth/session').then(signedIn, () => signedIn(null));
  }, [signedIn]);

  if (session === undefined) return <p className="loading">Loading…</p>;
  if (route[0] === 'setup' && !session) {
    return <SetupPage token={route[1] ?? ''} onDone={signedIn} />;
  }
  if (!session) {
    // A refused sign-in with the identity provider comes back as #/signin-error/<reason>.
    const refused = route[0] === 'signin-error' ? decodeURIComponent(route[1] ?? '') : undefined;
    return <SignInPage onDone={signedIn} refused={refused} />;
  }

  const role = session.user.role;
  // Pages the role cannot see are left out of the navigation (and the API refuses them anyway).
  const pages = PAGES.filter((p) => seesPage(role, p.path));
  const current: PagePath = pages.find((p) => p.path === route[0])?.path ?? 'overview';
  const Page = PAGE_COMPONENTS[current];
  const signOut = async () => {
    try {
      await api('POST', '/auth/logout');
    } finally {
      signedIn(null);
      go('');
    }
  };
  return (
    <div className="layout">
      <a
        className="skip"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <header className="topbar">
        <span className="brand">Burrow</span>
        <span className="who">
          Signed in as <strong>{session.user.name}</strong>{' '}
          <span className="role" title="Your role">
            ({role})
          </span>
          <button type="button" className="secondary" onClick={() => void signOut()}>
            Sign out
          </button>
        </span>
      </header>
      <nav aria-label="Main" className="sidenav">
        <ul>
          {pages.map((p) => (
            <li key={p.path}>
              <a href={`#/${p.path}`} aria-current={p.path === current ? 'page' : undefined}>
                {p.name}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main" tabIndex={-1}>
        {role === 'viewer' ? (
          <p className="notice" role="note">
            You are a viewer: you can look at everything here but change nothing. An admin can give
            you another role.
          </p>
        ) : null}
        <CanChangeContext.Provider value={canChangePage(role, current)}>
          <Page key={current} />
        </CanChangeContext.Provider>
      </main>
    </div>
  );
}

/** A page of its own for signing in or setting up, outside the navigation. */
function AuthPage({ children }: { children: ReactNode }) {
  return (
    <main className="auth-page" id="main">
      {children}
    </main>
  );
}

/** The form of an {@link AuthPage}, named by its heading. */
function AuthForm({
  title,
  onSubmit,
  children,
}: {
  title: string;
  onSubmit: () => Promise<void>;
  children: ReactNode;
}) {
  const titleId = useId();
  return (
    <AuthPage>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void onSubmit();
        }}
        className="card"
        aria-labelledby={titleId}
      >
        <h1 id={titleId}>{title}</h1>
        {children}
      </form>
    </AuthPage>
  );
}

/** The user name and password fields; `isNew` when the password is being chosen, not entered. */
function NameAndPassword({
  name,
  onName,
  password,
  onPassword,
  isNew = false,
}: {
  name: string;
  onName: (name: string) => void;
  password: string;
  onPassword: (password: string) => void;
  isNew?: boolean;
}) {
  return (
    <>
      <TextField
        label="User name"
        value={name}
        onChange={onName}
        autoComplete="username"
        required
      />
      <TextField
        label="Password"
        type="password"
        value={password}
        onChange={onPassword}
        required
        // Tells password managers whether to fill in a saved password or to offer a new one.
        {...(isNew
          ? { hint: 'At least 8 characters.', autoComplete: 'new-password', minLength: 8 }
          : { autoComplete: 'current-password' })}
      />
    </>
  );
}

function SignInPage({
  onDone,
  refused,
}: {
  onDone: (s: Session) => void;
  refused: string | undefined;
}) {
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | undefined>(refused);
  const [busy, setBusy] = useState(false);
  const [oidc, setOidc] = useState(false);
  useEffect(() => {
    api<{ oidc: boolean }>('GET', '/auth/methods').then(
      (m) => setOidc(m.oidc),
      () => setOidc(false),
    );
  }, []);
  const submit = async () => {
    setBusy(true);
    try {
      onDone(await api<Session>('POST', '/auth/login', { name, password }));
      if (/^#\/(setup|signin-error)/.test(window.location.hash)) go('overview');
    } catch (err) {
      setError(errorMessage(err));
      setPassword('');
    } finally {
      setBusy(false);
    }
  };
  return (
    <AuthForm title="Sign in to Burrow" onSubmit={submit}>
      <ErrorMessage error={error} />
      {oidc ? (
        <p>
          <a className="button" href="/auth/oidc/start">
            Sign in with your identity provider
          </a>
        </p>
      ) : null}
      <NameAndPassword name={name} onName={setName} password={password} onPassword={setPassword} />
      <button type="submit" disabled={busy}>
        Sign in
      </button>
      <p className="hint">
        No user yet? Run <code>burrow user add &lt;name&gt;</code> on the server, or open the setup
        link it printed at its first start.
      </p>
    </AuthForm>
  );
}

function SetupPage({ token, onDone }: { token: string; onDone: (s: Session) => void }) {
  const [valid, setValid] = useState<boolean | undefined>(undefined);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const [error, setError] = useState<string | undefined>(undefined);
  useEffect(() => {
    api<{ valid: boolean }>('GET', `/auth/setup/${encodeURIComponent(token)}`).then(
      (r) => setValid(r.valid),
      () => setValid(false),
    );
  }, [token]);
  const submit = async () => {
    if (password !== again) {
      setError('The two passwords differ.');
      return;
    }
    try {
      const s = await api<Session>('POST', '/auth/setup', { token, name, password });
      go('overview');
      onDone(s);
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  if (valid === undefined) return <p className="loading">Checking the setup link…</p>;
  if (!valid) {
    return (
      <AuthPage>
        <div className="card">
          <h1>This setup link no longer works</h1>
          <p role="alert">
            It has been used or has expired. Restart <code>burrow server</code> for a new one, or
            create a user with <code>burrow user add &lt;name&gt;</code>.
          </p>
          <a href="#/">Go to sign-in</a>
        </div>
      </AuthPage>
    );
  }
  return (
    <AuthForm title="Create the first user" onSubmit={submit}>
      <p>This link works once. The user you create here can then sign in to this dashboard.</p>
      <ErrorMessage error={error} />
      <NameAndPassword
        name={name}
        onName={setName}
        password={password}
        onPassword={setPassword}
        isNew
      />
      <TextField
        label="Password again"
        type="password"
        value={again}
        onChange={setAgain}
        autoComplete="new-password"
        required
      />
      <button type="submit">Create user and sign in</button>
    </AuthForm>
  );
}
