/**
 * Socket reads into shared slabs instead of a fresh buffer per read.
 *
 * Node allocates a new buffer for every read of a socket: 64 KiB per TCP read, and one per TLS
 * record (up to 16 KiB) on a TLS socket. On a bulk transfer that is tens of thousands of
 * short-lived ArrayBuffers per GiB, each a malloc, a JS object and garbage. With Node's `onread`
 * option a socket reads into memory we give it; here each read goes into the free tail of a
 * larger slab, the next read starts after it, and a new slab is taken when the tail is too short.
 * The chunks handed on are views of the slab that nothing ever overwrites, so a reader may keep
 * them as long as it likes (muxado hands DATA payloads to streams that buffer them), unlike a
 * single reused read buffer, whose bytes would have to be copied out first.
 *
 * The cost: a slab lives while any chunk of it does, so a reader that holds on to a few bytes for
 * long keeps up to one slab alive for them. Use it for the few long-lived connections that carry
 * bulk data (an agent's link to the edge), not for every accepted socket.
 *
 * `onread` is only a connect-time option (`net.connect`, `tls.connect`, `new net.Socket`):
 * sockets accepted by a server cannot be given it. `readIntoSlabs` switches such a socket over
 * after the fact, through the same machinery (the edge's agent links: a fresh 16 KiB buffer per
 * TLS record cost the edge about 15 % of its CPU on a bulk download in page faults alone,
 * docs/benchmarks.md).
 */
import net, { type OnReadOpts, type Socket } from 'node:net';

/** Bytes per slab: 16 TLS records or 4 TCP reads. */
export const READ_SLAB_SIZE = 256 * 1024;
/** Room a read needs: a whole TLS record (16 KiB); a shorter tail starts a new slab. */
const MIN_READ_ROOM = 16 * 1024;

export interface SlabReads {
  /** Give this as `onread` to `net.connect` or `tls.connect`. */
  readonly onread: OnReadOpts;
  /**
   * Bind the socket those options were given to (before it can read): its reads are then emitted
   * as its 'data' events, so it is read like any socket. Reads that come before anyone listens
   * for 'data' wait (and the socket pauses) until someone does.
   */
  attach(socket: Socket): void;
  /**
   * The socket reads no more (it closed): its slab goes back to the lender, spare once the views
   * lent from it are given back.
   */
  leave(): void;
}

/** Where a slab is: read into now, left by the reads (its views may still be out), or spare. */
const enum SlabUse {
  Reading,
  Left,
  Spare,
}

interface SlabState {
  slab: Buffer;
  /** Bytes of views lent out and not given back (a view lent twice counts twice). */
  out: number;
  use: SlabUse;
}

/**
 * Lends slab memory out and takes it back, so that a slab can be read into again instead of a
 * fresh one being allocated: per slab, the bytes of views lent and not given back are counted,
 * and a slab the reads have left is kept as a spare once that count is zero. A view that is
 * never given back (its holder keeps it, or does not know this protocol) only keeps its slab
 * from being reused: the garbage collector frees it as before. Giving back a view whose bytes
 * are still in use would let a later read overwrite them, so only a holder that knows nothing
 * refers to them any more may do it (muxado: `MuxStream.release`).
 *
 * Each slab a transfer allocates is external memory to V8; a bulk transfer through fresh slabs
 * keeps that memory growing between collections, which is what starts V8's major GCs on a
 * server whose old generation is near its limit (docs/benchmarks.md, issue 29).
 */
export class SlabLender {
  private readonly slabs = new WeakMap<ArrayBufferLike, SlabState>();
  private readonly spare: Buffer[] = [];
  /** Slabs read into again instead of allocated (for tests and benchmarks). */
  reused = 0;
  /** Slabs handed to readers, spare or fresh (for tests and benchmarks). */
  taken = 0;

  /** Slabs kept spare now (for tests and benchmarks). */
  get spareSlabs(): number {
    return this.spare.length;
  }

  constructor(
    readonly slabSize: number = READ_SLAB_SIZE,
    /** Spare slabs kept at most; past that, a freed slab is left to the garbage collector. */
    private readonly maxSpare = 16,
  ) {}

  /** The slab looked up last, and its state: consecutive reads and chunks are of one slab. */
  private lastBuffer: ArrayBufferLike | undefined;
  private lastState: SlabState | undefined;

  private stateOf(buffer: ArrayBufferLike): SlabState | undefined {
    if (buffer === this.lastBuffer) return this.lastState;
    // Other memory, told apart without a lookup (a sendLender sees every piece a stream writes).
    if (buffer.byteLength !== this.slabSize) return undefined;
    const state = this.slabs.get(buffer);
    if (state) {
      this.lastBuffer = buffer;
      this.lastState = state;
    }
    return state;
  }

  /** @internal A slab to read into: a spare one when there is one. */
  take(): Buffer {
    this.taken++;
    const slab = this.spare.pop();
    if (slab) {
      this.reused++;
      this.stateOf(slab.buffer)!.use = SlabUse.Reading;
      return slab;
    }
    const fresh = Buffer.allocUnsafe(this.slabSize);
    this.slabs.set(fresh.buffer, { slab: fresh, out: 0, use: SlabUse.Reading });
    return fresh;
  }

  /** @internal The reads have left `slab`. */
  leave(slab: Buffer): void {
    const state = this.stateOf(slab.buffer);
    if (!state || state.use !== SlabUse.Reading) return;
    state.use = SlabUse.Left;
    this.spareIfFree(state);
  }

  /**
   * Count `view`, a read of one of our slabs (or a DATA chunk in one), as held until
   * {@link giveBackRead}; false for other memory. The view itself is not remembered: its one
   * reader gives each back exactly once (a muxado session gives back its reads once parsed and
   * checks its readers' releases of DATA chunks itself, MuxSession.giveBack), and a WeakMap entry
   * per view (an insert, a delete, and the ephemeron table's rehashing and collection) cost the
   * edge about 1.5 % of its CPU per keep-alive request.
   */
  lendRead(view: Buffer): boolean {
    return this.lendSlab(view, view.length);
  }

  /** Whether `view` is memory of one of our slabs (lent, or to be lent). */
  lends(view: Buffer): boolean {
    return this.stateOf(view.buffer) !== undefined;
  }

  /** {@link lendRead} for `length` bytes read into `slab`, without a view made for them. */
  lendSlab(slab: Buffer, length: number): boolean {
    const state = this.stateOf(slab.buffer);
    if (!state || length === 0) return false;
    state.out += length;
    return true;
  }

  /** The reader is done with `view`, a read lent with {@link lendRead}: once per read. */
  giveBackRead(view: Buffer): void {
    if (view.length === 0) return;
    const state = this.stateOf(view.buffer);
    if (!state) return;
    state.out -= view.length;
    this.spareIfFree(state);
  }

  private spareIfFree(state: SlabState): void {
    if (state.use !== SlabUse.Left || state.out > 0) return;
    if (this.spare.length >= this.maxSpare) return;
    state.use = SlabUse.Spare;
    this.spare.push(state.slab);
  }
}

/**
 * Takes each read where it landed: `length` bytes at `start` of `slab`, which nothing overwrites
 * (while lent, until given back); the next read of the same slab, if any, follows them.
 */
export type SlabReadSink = (slab: Buffer, start: number, length: number) => void;

/**
 * An `onread` for a socket that reads into slabs of `slabSize` (lent from `lender`, when given):
 * each read is a view of a slab, to the socket's 'data' listeners, or to `sink` when given.
 * @example
 * const reads = slabReads();
 * const socket = tls.connect({ host, port, onread: reads.onread } as tls.ConnectionOptions);
 * reads.attach(socket);
 * socket.on('data', (chunk) => parser.push(chunk)); // chunk: a view of a slab, safe to keep
 */
export function slabReads(
  slabSize: number = READ_SLAB_SIZE,
  /** Reads are lent from it: each read until it is given back (`giveBackRead`, once each). */
  lender?: SlabLender,
  /**
   * Where the reads go instead of 'data' events: no Buffer and no event per read (a TLS record),
   * for a reader that joins contiguous reads itself (MuxSession.slabSink). Its reads are lent
   * all the same: the reader gives back views of what it read, each byte once.
   */
  sink?: SlabReadSink,
): SlabReads {
  if (slabSize < MIN_READ_ROOM) throw new RangeError(`slab size below ${MIN_READ_ROOM}`);
  if (lender && lender.slabSize !== slabSize) throw new RangeError('lender of another size');
  let slab = lender ? lender.take() : Buffer.allocUnsafe(slabSize);
  /** Bytes of `slab` handed out; the next read goes after them. */
  let used = 0;
  let socket: Socket | undefined;
  const early: Buffer[] = [];

  const listening = (): boolean => socket !== undefined && socket.listenerCount('data') > 0;
  const flush = (): void => {
    while (early.length > 0 && listening()) socket!.emit('data', early.shift()!);
    if (early.length === 0 && socket && !socket.destroyed) socket.resume();
  };

  return {
    onread: {
      // Node asks for the next read's memory after each read (and once before the first).
      buffer: () => {
        if (slabSize - used < MIN_READ_ROOM) {
          if (lender) {
            lender.leave(slab);
            slab = lender.take();
          } else {
            slab = Buffer.allocUnsafe(slabSize);
          }
          used = 0;
        }
        return slab.subarray(used);
      },
      callback: (bytes: number, buf: Uint8Array): boolean => {
        let chunk: Buffer;
        if (sink !== undefined) {
          if (buf.buffer === slab.buffer && buf.byteOffset === slab.byteOffset + used) {
            const start = used;
            used += bytes;
            lender?.lendSlab(slab, bytes);
            sink(slab, start, bytes);
          } else {
            sink(Buffer.from(buf.subarray(0, bytes)), 0, bytes);
          }
          return true;
        }
        if (buf.buffer === slab.buffer && buf.byteOffset === slab.byteOffset + used) {
          chunk = slab.subarray(used, used + bytes);
          used += bytes;
          lender?.lendRead(chunk);
        } else {
          // Not the tail we handed out (not something Node does): keep nothing that a later read
          // could overwrite.
          chunk = Buffer.from(buf.subarray(0, bytes));
        }
        if (early.length === 0 && listening()) {
          socket!.emit('data', chunk);
          return true;
        }
        early.push(chunk);
        return false; // pauses the socket until flush()
      },
    },
    leave(): void {
      lender?.leave(slab);
    },
    attach(s: Socket): void {
      socket = s;
      s.on('newListener', (event: string | symbol) => {
        if (event === 'data' && early.length > 0) process.nextTick(flush);
      });
    },
  };
}

/** Node's own keys for a socket's `onread` state (net.js), found once from a probe socket. */
interface OnreadKeys {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}
let onreadKeys: OnreadKeys | null | undefined;

function findOnreadKeys(): OnreadKeys | null {
  if (onreadKeys !== undefined) return onreadKeys;
  onreadKeys = null;
  try {
    const probe = new net.Socket({
      onread: { buffer: () => Buffer.allocUnsafe(1), callback: () => true },
    } as net.SocketConstructorOpts);
    const bySymbol = new Map(
      Object.getOwnPropertySymbols(probe).map((s) => [s.description, s] as const),
    );
    const buffer = bySymbol.get('kBuffer');
    const callback = bySymbol.get('kBufferCb');
    const generator = bySymbol.get('kBufferGen');
    if (buffer && callback && generator) onreadKeys = { buffer, callback, generator };
    probe.destroy();
  } catch {
    // No such options in this Node: reads stay as they are.
  }
  return onreadKeys;
}

/**
 * Switch a socket that is already reading (one a server accepted, where Node offers no
 * `onread`) to slab reads: its later reads go into shared slabs, each emitted as a 'data'
 * event as `slabReads` does. Uses Node's own `onread` machinery (the handle's `useUserBuffer`
 * and the socket's onread state); where this Node does not have it, nothing changes and false
 * is returned.
 * @example server.on('secureConnection', (socket) => readIntoSlabs(socket));
 */
export function readIntoSlabs(
  socket: Socket,
  slabSize: number = READ_SLAB_SIZE,
  /** Each read is lent from it until given back (MuxSessionOptions.lender). */
  lender?: SlabLender,
  /** Where the reads go instead of the socket's 'data' events (MuxSession.slabSink). */
  sink?: SlabReadSink,
): boolean {
  const keys = findOnreadKeys();
  const handle = (socket as unknown as { _handle?: { useUserBuffer?: (b: Uint8Array) => void } })
    ._handle;
  if (!keys || typeof handle?.useUserBuffer !== 'function') return false;
  const state = socket as unknown as Record<symbol, unknown>;
  // Already reads into memory it was given; or bytes wait in its buffer, which must come first.
  if (state[keys.buffer] || socket.readableLength > 0) return false;
  const reads = slabReads(slabSize, lender, sink);
  const { onread } = reads;
  const generate = (): Uint8Array => (onread.buffer as () => Uint8Array)();
  const first = generate();
  state[keys.generator] = generate;
  state[keys.callback] = (bytes: number, buf: Uint8Array): boolean | void =>
    onread.callback(bytes, buf);
  state[keys.buffer] = first;
  handle.useUserBuffer(first);
  reads.attach(socket);
  if (lender) socket.once('close', () => reads.leave());
  return true;
}
