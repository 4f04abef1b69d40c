import type { Logger } from '../core/logger.js';
import type { Repositories } from '../store/index.js';

/** How long the first-start setup link works. */
export const SETUP_LINK_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * With no dashboard user yet, print a one-time link that creates the first one in the browser.
 * The token is in the URL's fragment, so browsers never send it to a server or a log; it is
 * written to stderr only (not the JSON log, which may be shipped elsewhere), and stored hashed.
 * Each start replaces the previous link.
 * @example await announceDashboardSetup(repos, 'http://127.0.0.1:4000', logger);
 */
export async function announceDashboardSetup(
  repos: Repositories,
  baseUrl: string,
  logger: Logger,
): Promise<void> {
  if ((await repos.users.count()) > 0) return;
  const token = await repos.users.issueSetupToken(SETUP_LINK_TTL_MS);
  logger.warn('No dashboard user exists yet; the one-time setup link is on stderr');
  process.stderr.write(
    `\n  Open the dashboard and create its first user (this link works once, for ${SETUP_LINK_TTL_MS / 3_600_000} hours):\n` +
      `    ${baseUrl}/#/setup/${token}\n` +
      `  or create one with: burrow user add <name>\n\n`,
  );
}
