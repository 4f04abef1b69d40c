import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`, in .ci/run); playwright never downloads one. */
export const CHROMIUM = '/usr/bin/chromium';

/** A browser with a fresh profile, and the way to close it and delete the profile. */
export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/**
 * Start headless Chromium with a fresh user-data-dir: nothing from a developer's profile, no
 * network of its own (no sync, updates or background fetches). `args` go to Chromium too (e.g.
 * `--host-resolver-rules=MAP app.burrow.test 127.0.0.1`).
 * @example const browser = await launchBrowser(); const page = await browser.context.newPage();
 */
export async function launchBrowser(args: readonly string[] = []): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'burrow-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      ...args,
    ],
    viewport: { width: 1280, height: 860 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
