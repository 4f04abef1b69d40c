/**
 * A task that runs at most once at a time; calls made while it runs fold into one more run after
 * it, so a change announced mid-run is never missed and a burst of calls costs two runs, not one
 * each. Every caller gets the promise of the run under way (with its follow-up), which settles when
 * the loop ends. A run that throws ends the loop: its callers see the rejection, and the next call
 * starts afresh. `stop`, asked before each follow-up, ends the loop early (the owner closed).
 * @example
 * const resync = coalesced(() => this.loadOnce(), { stop: () => this.closed });
 * await Promise.all([resync(), resync(), resync()]); // two loads: the first, then one for the rest
 */
export function coalesced(
  task: () => Promise<void>,
  options: { stop?: () => boolean } = {},
): () => Promise<void> {
  let running: Promise<void> | undefined;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await task();
        } while (again && options.stop?.() !== true);
      } finally {
        running = undefined;
      }
    })();
    return running;
  };
}
