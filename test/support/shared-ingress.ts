import { afterAll, beforeAll } from 'vitest';
import { startTestUpstream, type TestUpstream } from './http-upstream.js';
import { fakeTunnel, startTestIngress, type TestIngress } from './ingress.js';

/** One ingress and one test upstream shared by the tests of a file. */
export interface SharedIngress {
  readonly ingress: TestIngress;
  readonly upstream: TestUpstream;
  /** Register an http tunnel for `name` in front of the shared upstream. */
  httpTunnel(name: string): ReturnType<typeof fakeTunnel>;
}

/**
 * Start a test ingress and a test upstream before the file's tests and close both after them.
 * Call at the top level of a test file; the fields are set once beforeAll has run.
 * @example const env = useSharedIngress(); it('...', () => env.httpTunnel('app.burrow.test'));
 */
export function useSharedIngress(): SharedIngress {
  let ingress: TestIngress | undefined;
  let upstream: TestUpstream | undefined;
  beforeAll(async () => {
    ingress = await startTestIngress();
    upstream = await startTestUpstream();
  });
  afterAll(async () => {
    await ingress?.close();
    await upstream?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the shared ingress is used before beforeAll ran');
    return value;
  };
  return {
    get ingress() {
      return started(ingress);
    },
    get upstream() {
      return started(upstream);
    },
    httpTunnel(name) {
      const tunnel = fakeTunnel({
        proto: 'http',
        hostname: name,
        upstreamPort: started(upstream).port,
      });
      started(ingress).registry.addTunnel(tunnel);
      return tunnel;
    },
  };
}
