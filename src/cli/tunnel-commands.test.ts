import { describe, expect, it } from 'vitest';
import { tunnelLabels } from './tunnel-commands.js';

describe('--label on burrow http|tcp|tls', () => {
  it('gives no labels without the flag, and key=value pairs with it', () => {
    expect(tunnelLabels({}, undefined)).toBeUndefined();
    expect(tunnelLabels({ label: ['app=ssh', 'site = a', 'expr=a=b'] }, undefined)).toEqual({
      app: 'ssh',
      site: 'a',
      expr: 'a=b',
    });
  });

  it('refuses a label that is not key=value, naming the flag', () => {
    for (const bad of ['app', '=ssh', 'app=']) {
      expect(() => tunnelLabels({ label: [bad] }, undefined)).toThrow(
        `--label ${JSON.stringify(bad)}: a label is key=value`,
      );
    }
  });

  it('refuses the flags that only an endpoint has, naming them', () => {
    expect(() =>
      tunnelLabels(
        { label: ['app=web'], domain: 'a.example.com', hostHeader: 'rewrite' },
        undefined,
      ),
    ).toThrow(/labeled tunnel.*drop --domain, --host-header, or drop --label/);
    expect(() => tunnelLabels({ label: ['app=db'], addr: 'localhost:20000' }, undefined)).toThrow(
      /drop --addr/,
    );
    expect(() => tunnelLabels({ label: ['app=web'] }, '{"on_http_request":[]}')).toThrow(
      /drop the endpoint flags and --policy-file/,
    );
  });
});
