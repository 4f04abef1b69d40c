/**
 * A backoff pause that a shutdown can cut short: `sleep(ms)` resolves after `ms`, or at once when
 * `wake()` is called, so closing a reconnect loop never waits out its backoff.
 * @example
 * const pause = new WakeableSleep();
 * await pause.sleep(5_000); // close() calls pause.wake() to end it early
 */
export class WakeableSleep {
  private wakeUp: (() => void) | undefined;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = done;
    });
  }

  /** End the current sleep now; does nothing when none is under way. */
  wake(): void {
    const wakeUp = this.wakeUp;
    this.wakeUp = undefined;
    wakeUp?.();
  }
}
