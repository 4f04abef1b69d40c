/**
 * Bytes that requests may hold at once, counted at several levels (an agent session, its
 * credential, the process), so that many requests each within their own size limit cannot add up
 * without limit: a read that would take any level past its limit is refused, and what earlier
 * requests hold is untouched.
 */

/** One level: the most bytes its requests may hold together, and how many they hold now. */
export class ByteBudget {
  private used = 0;

  constructor(
    /** What the level is, for the refusal and the metric label (`agent_rpc_bytes_per_session`). */
    readonly name: string,
    readonly limit: number,
    /** Told of every change (+n taken, -n given back), to keep a gauge. */
    private readonly onChange?: ((delta: number) => void) | undefined,
  ) {}

  get held(): number {
    return this.used;
  }

  /** @internal BudgetHold's: levels are taken together, after all have been checked. */
  add(delta: number): void {
    this.used += delta;
    this.onChange?.(delta);
  }
}

/** A read refused because a level of its budget is spent; `budget` names the level. */
export class BudgetExceededError extends RangeError {
  constructor(
    readonly budget: ByteBudget,
    readonly wanted: number,
  ) {
    super(
      `requests in progress hold ${budget.held} bytes of the ${budget.limit} allowed per ${budget.name}; ${wanted} more were refused`,
    );
  }
}

/**
 * What one request holds from its levels: taken chunk by chunk as it is read, given back all at
 * once when the request is answered (or fails).
 * @example
 * const hold = new BudgetHold([sessionBudget, credentialBudget, processBudget]);
 * try { await readJsonObject(stream, { budget: hold }); … } finally { hold.release(); }
 */
export class BudgetHold {
  private taken = 0;

  constructor(private readonly levels: readonly ByteBudget[]) {}

  /** Take `n` more bytes from every level, or throw BudgetExceededError and take nothing. */
  take(n: number): void {
    for (const level of this.levels) {
      if (level.held + n > level.limit) throw new BudgetExceededError(level, n);
    }
    for (const level of this.levels) level.add(n);
    this.taken += n;
  }

  /** Give back everything taken; safe to call again. */
  release(): void {
    if (this.taken === 0) return;
    for (const level of this.levels) level.add(-this.taken);
    this.taken = 0;
  }
}
