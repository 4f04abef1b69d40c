/**
 * A coarse timer wheel for idle deadlines that are pushed back far more often than they fire
 * (an agent session's liveness, re-armed on every heartbeat; an idle stream's expiry).
 *
 * Why not one `setTimeout` each: re-arming a Node timer with clearTimeout + setTimeout allocates
 * a new Timeout and relinks it in Node's timer lists on every activity, and each armed timer is
 * kept per object. Here an entry is allocated once per owner; `touch()` only writes its deadline
 * (no allocation, no relinking), and one shared tick, running only while entries are armed,
 * looks at one bucket. An entry whose deadline moved later is moved to its new bucket
 * when its old one comes up, so the work is once per tick per *due* bucket, not per activity.
 *
 * Deadlines are coarse: an entry fires after its deadline, within one tick of it, never before.
 */

/** A callback armed on a wheel. Allocate one per owner and re-arm it; it is never re-created. */
export class WheelTimer {
  /** When it is due (ms on the wheel's clock); 0 while not armed. */
  deadline = 0;
  /** @internal The bucket it is linked in, -1 when in none. */
  bucket = -1;
  /** @internal Neighbours in its bucket's list. */
  prev: WheelTimer | undefined;
  /** @internal */
  next: WheelTimer | undefined;

  constructor(
    private readonly wheel: TimerWheel,
    /** Called once when the deadline passes (then the timer is disarmed). */
    readonly onExpire: () => void,
  ) {}

  /** Whether it is armed. */
  get armed(): boolean {
    return this.deadline !== 0;
  }

  /** Arm (or re-arm) to fire `ms` from now. */
  schedule(ms: number): void {
    this.wheel.arm(this, ms);
  }

  /**
   * Push an armed timer's deadline to `ms` from now, as on activity: one field write, nothing
   * allocated and nothing relinked (the wheel moves it when its current bucket comes up). A timer
   * that is not armed is armed.
   */
  touch(ms: number): void {
    const deadline = this.wheel.now() + ms;
    // Earlier than it was (or not armed): it must be relinked to be looked at in time.
    if (this.bucket < 0 || deadline < this.deadline) this.wheel.arm(this, ms);
    else this.deadline = deadline;
  }

  /** Disarm; it will not fire. */
  cancel(): void {
    this.wheel.disarm(this);
  }
}

export interface TimerWheelOptions {
  /** Tick length: how late past its deadline a timer may fire (default 1000 ms). */
  tickMs?: number;
  /** Buckets in the wheel; a deadline further than buckets × tick goes round again (default 64). */
  buckets?: number;
  /** The clock (default Date.now); tests pass their own. */
  now?: () => number;
}

/**
 * @example
 * const wheel = new TimerWheel({ tickMs: 1000 });
 * const liveness = wheel.timer(() => session.destroy());
 * liveness.schedule(25_000);
 * stream.on('data', () => liveness.touch(25_000)); // on each beat: no allocation
 * liveness.cancel(); // on close
 */
export class TimerWheel {
  readonly tickMs: number;
  readonly now: () => number;
  private readonly heads: (WheelTimer | undefined)[];
  /** The tick (time / tickMs) whose bucket was looked at last. */
  private cursor: number;
  private count = 0;
  private ticker: NodeJS.Timeout | undefined;
  private readonly onTick = (): void => {
    this.ticker = undefined;
    this.advance();
    // A callback may have armed a timer, and with it the next tick, already.
    if (this.count > 0 && !this.ticker) this.startTicking();
  };

  constructor(options: TimerWheelOptions = {}) {
    this.tickMs = options.tickMs ?? 1000;
    this.now = options.now ?? Date.now;
    this.heads = new Array<WheelTimer | undefined>(options.buckets ?? 64).fill(undefined);
    this.cursor = Math.floor(this.now() / this.tickMs);
  }

  /** A new, unarmed timer calling `onExpire` when it expires. */
  timer(onExpire: () => void): WheelTimer {
    return new WheelTimer(this, onExpire);
  }

  /** Timers armed now. */
  get size(): number {
    return this.count;
  }

  /** @internal Arm `t` for `ms` from now (WheelTimer.schedule). */
  arm(t: WheelTimer, ms: number): void {
    if (t.bucket < 0) this.count++;
    else this.unlink(t);
    t.deadline = Math.max(1, this.now() + ms);
    this.link(t);
    if (!this.ticker) {
      this.cursor = Math.max(this.cursor, Math.floor(this.now() / this.tickMs));
      this.startTicking();
    }
  }

  /** @internal WheelTimer.cancel. */
  disarm(t: WheelTimer): void {
    if (t.bucket < 0) return;
    this.unlink(t);
    t.deadline = 0;
    this.count--;
    // Nothing armed: no tick, so an idle process has no wheel wake-ups at all.
    if (this.count === 0) this.stop();
  }

  /**
   * Look at every bucket whose tick has come since the last look (normally one): fire what is
   * due, move what was pushed back. Called on each tick; tests with their own clock call it.
   */
  advance(): void {
    const target = Math.floor(this.now() / this.tickMs);
    // After a long stall every bucket has come up once; one lap visits them all.
    const laps = Math.min(target - this.cursor, this.heads.length);
    const due: WheelTimer[] = [];
    for (let i = 1; i <= laps; i++) this.collect((this.cursor + i) % this.heads.length, due);
    this.cursor = Math.max(this.cursor, target);
    // Fired after the sweep, so a callback that arms timers does not disturb the lists walked.
    if (this.count === 0) this.stop();
    for (const t of due) t.onExpire();
  }

  /** Stop ticking; armed timers stay armed and do not fire until a timer is armed again. */
  stop(): void {
    clearTimeout(this.ticker);
    this.ticker = undefined;
  }

  /**
   * Tick at the next multiple of tickMs, so a bucket is looked at as soon as its tick is over and
   * a timer fires within one tick of its deadline (an interval's phase would add up to a tick).
   */
  private startTicking(): void {
    this.ticker = setTimeout(this.onTick, this.tickMs - (this.now() % this.tickMs));
    // Pending idle deadlines must not keep a process alive that has nothing else to do.
    this.ticker.unref();
  }

  private collect(bucket: number, due: WheelTimer[]): void {
    const now = this.now();
    let t = this.heads[bucket];
    while (t) {
      const next = t.next;
      if (t.deadline <= now) {
        this.unlink(t);
        t.deadline = 0;
        this.count--;
        due.push(t);
      } else if (this.bucketOf(t.deadline) !== bucket) {
        // touch() pushed it back: it belongs to a later bucket now.
        this.unlink(t);
        this.link(t);
      }
      // Otherwise it is due in a later lap of the same bucket.
      t = next;
    }
  }

  private bucketOf(deadline: number): number {
    // Rounded up, so a timer is never looked at (and fired) before its deadline's tick is over.
    return Math.ceil(deadline / this.tickMs) % this.heads.length;
  }

  private link(t: WheelTimer): void {
    const bucket = this.bucketOf(t.deadline);
    const head = this.heads[bucket];
    t.bucket = bucket;
    t.prev = undefined;
    t.next = head;
    if (head) head.prev = t;
    this.heads[bucket] = t;
  }

  private unlink(t: WheelTimer): void {
    if (t.bucket < 0) return;
    if (t.prev) t.prev.next = t.next;
    else this.heads[t.bucket] = t.next;
    if (t.next) t.next.prev = t.prev;
    t.prev = t.next = undefined;
    t.bucket = -1;
  }
}

/** The process's shared wheel, 1 s ticks: one timer for every idle deadline of the edge. */
export const idleWheel = new TimerWheel();
