/**
 * A fixed-size ring: pushing past capacity overwrites the oldest item, in O(1) (no shift, no
 * compaction), so a list kept per request costs the same at its cap as below it.
 * @example const ring = new Ring<number>(2); ring.push(1); ring.push(2); ring.push(3); ring.list() // [3, 2]
 */
export class Ring<T> {
  private readonly slots: T[] = [];
  private next = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError('capacity must be a positive integer');
    }
  }

  push(item: T): void {
    if (this.slots.length < this.capacity) this.slots.push(item);
    else this.slots[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
  }

  /** Newest first. */
  list(): T[] {
    const out: T[] = [];
    const n = this.slots.length;
    for (let i = 1; i <= n; i++) out.push(this.slots[(this.next - i + n * 2) % n]!);
    return out;
  }
}
