import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS, type ServerLimits } from '../../core/limits.js';
import { fitToOpenFiles, openFilesLimit, processReserve } from './descriptor-budget.js';

const PROC_LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            256                  4096                 files
Max locked memory         8388608              8388608              bytes
`;

const totalCaps = (l: ServerLimits): number =>
  l.apiMaxConnections + l.agentMaxConnections + l.ingressMaxConnections;

describe('openFilesLimit', () => {
  it('reads the soft limit of /proc/self/limits, and nothing when it is unlimited', () => {
    expect(openFilesLimit(PROC_LIMITS)).toBe(256);
    expect(openFilesLimit(PROC_LIMITS.replace('256  ', 'unlimited'))).toBeUndefined();
    expect(openFilesLimit('')).toBeUndefined();
  });

  it("reads this process's own limit on Linux", () => {
    if (process.platform !== 'linux') return;
    expect(openFilesLimit()).toBeGreaterThan(0);
  });
});

describe('fitToOpenFiles', () => {
  it.each([256, 1024, 4096])(
    'keeps every cap together under a limit of %i less the reserve, agents keeping their share',
    (openFiles) => {
      const { limits, lowered } = fitToOpenFiles(DEFAULT_LIMITS, 'all', openFiles);
      expect(totalCaps(limits)).toBeLessThanOrEqual(openFiles - processReserve(openFiles));
      // What the API and the ingress may hold at most leaves the agents' cap free.
      expect(limits.apiMaxConnections + limits.ingressMaxConnections).toBeLessThanOrEqual(
        openFiles - processReserve(openFiles) - limits.agentMaxConnections,
      );
      expect(limits.agentMaxConnections).toBeGreaterThan(0);
      for (const [total, perIp] of [
        [limits.apiMaxConnections, limits.apiMaxConnectionsPerIp],
        [limits.agentMaxConnections, limits.agentMaxConnectionsPerIp],
        [limits.ingressMaxConnections, limits.ingressMaxConnectionsPerIp],
      ] as const) {
        expect(perIp).toBeLessThanOrEqual(Math.max(1, Math.floor(total / 2)));
      }
      expect(lowered).toContain(
        `ingressMaxConnections: ${DEFAULT_LIMITS.ingressMaxConnections} → ${limits.ingressMaxConnections}`,
      );
    },
  );

  it('gives the shares only to the listeners the role runs', () => {
    const api = fitToOpenFiles(DEFAULT_LIMITS, 'api', 1024).limits;
    const all = fitToOpenFiles(DEFAULT_LIMITS, 'all', 1024).limits;
    expect(api.apiMaxConnections).toBeGreaterThan(all.apiMaxConnections);
    expect(api.ingressMaxConnections).toBe(DEFAULT_LIMITS.ingressMaxConnections);
    const edge = fitToOpenFiles(DEFAULT_LIMITS, 'edge', 1024).limits;
    expect(edge.apiMaxConnections).toBe(DEFAULT_LIMITS.apiMaxConnections);
    expect(edge.ingressMaxConnections).toBeGreaterThan(all.ingressMaxConnections);
  });

  it('gives what a listener configured below its share leaves to the others, by weight', () => {
    // A node for agents (issue 35): at 20,000 descriptors, 17,500 after the reserve.
    const agents = {
      ...DEFAULT_LIMITS,
      apiMaxConnections: 100,
      ingressMaxConnections: 1500,
      agentMaxConnections: 100_000,
      agentMaxConnectionsPerIp: 100_000,
    };
    const fitted = fitToOpenFiles(agents, 'all', 20_000).limits;
    expect(fitted).toMatchObject({ apiMaxConnections: 100, ingressMaxConnections: 1500 });
    expect(fitted.agentMaxConnections).toBe(17_500 - 100 - 1500);
    expect(fitted.agentMaxConnectionsPerIp).toBe(Math.floor((17_500 - 100 - 1500) / 2));
    // The API's small cap alone is shared out 2:5 between agents and the ingress.
    const api = fitToOpenFiles({ ...agents, ingressMaxConnections: 100_000 }, 'all', 20_000);
    expect(api.limits.agentMaxConnections).toBe(Math.floor((17_400 * 2) / 7));
    expect(api.limits.ingressMaxConnections).toBe(Math.floor((17_400 * 5) / 7));
    // Caps that fit together are left alone: the defaults at 20,000 need no lowering.
    expect(fitToOpenFiles(DEFAULT_LIMITS, 'all', 20_000).lowered).toEqual([]);
    expect(totalCaps(fitted)).toBeLessThanOrEqual(20_000 - processReserve(20_000));
  });

  it('keeps caps below the share as configured, and all of them when no limit is known', () => {
    const small = { ...DEFAULT_LIMITS, apiMaxConnections: 5, apiMaxConnectionsPerIp: 5 };
    const fitted = fitToOpenFiles(small, 'all', 1024);
    expect(fitted.limits).toMatchObject({ apiMaxConnections: 5, apiMaxConnectionsPerIp: 5 });
    expect(fitted.lowered.some((l) => l.startsWith('apiMax'))).toBe(false);
    expect(fitToOpenFiles(DEFAULT_LIMITS, 'all', undefined)).toEqual({
      limits: DEFAULT_LIMITS,
      openFiles: undefined,
      lowered: [],
    });
    expect(fitToOpenFiles(DEFAULT_LIMITS, 'all', 1_048_576).lowered).toEqual([]);
  });
});
