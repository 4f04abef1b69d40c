/**
 * A bounded queue of accepted items with promise-based takers. `offer` refuses items beyond the
 * limit so the caller can reject them (RST AcceptQueueFull) instead of buffering without bound.
 *
 * @example
 * const queue = new AcceptQueue<MuxStream>(128);
 * if (!queue.offer(stream)) stream.reset(ErrorCode.AcceptQueueFull);
 * const next = await queue.take();
 */
export class AcceptQueue<T> {
  private readonly items: T[] = [];
  private readonly takers: { resolve: (item: T) => void; reject: (err: Error) => void }[] = [];
  private failure: Error | undefined;

  constructor(private readonly limit: number) {}

  /** Hand `item` to a waiting taker or queue it; false when the queue is full or closed. */
  offer(item: T): boolean {
    if (this.failure) return false;
    const taker = this.takers.shift();
    if (taker) {
      taker.resolve(item);
      return true;
    }
    if (this.items.length >= this.limit) return false;
    this.items.push(item);
    return true;
  }

  /** The next item; rejects once the queue is closed and empty. */
  take(): Promise<T> {
    if (this.items.length > 0) return Promise.resolve(this.items.shift()!);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.takers.push({ resolve, reject }));
  }

  get size(): number {
    return this.items.length;
  }

  /** Fail waiting and future takers with `err`; returns the items never taken. */
  close(err: Error): T[] {
    if (!this.failure) this.failure = err;
    for (const taker of this.takers.splice(0)) taker.reject(err);
    return this.items.splice(0);
  }
}
