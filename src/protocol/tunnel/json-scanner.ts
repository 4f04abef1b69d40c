/**
 * Finds where one JSON object ends in a byte stream that has no EOF: RPC requests arrive on a
 * stream the caller keeps open (docs/protocol.md §5.2), so the responder must find the closing
 * brace itself. The scanner tracks brace depth outside strings and string/escape state, so braces
 * and escaped quotes inside strings are skipped. It looks at bytes only: every byte of a UTF-8
 * multibyte sequence is >= 0x80 and can never be mistaken for `{`, `}`, `"` or `\`.
 *
 * It checks structure only as far as it needs to; JSON.parse on the bytes it delimits does the
 * rest.
 *
 * @example
 * const scanner = new JsonObjectScanner();
 * scanner.push(Buffer.from('{"a":"}"')); // -1: not finished
 * scanner.push(Buffer.from('}\n'));      // 1: the object ends before index 1 of this chunk
 */
export class JsonObjectScanner {
  private started = false;
  private depth = 0;
  private inString = false;
  private escaped = false;
  private seen = 0;
  /** Nesting of objects and arrays together, bounded so nothing recursive later meets a deep one. */
  private nesting = 0;

  /**
   * @param maxBytes bytes an object (with leading whitespace) may take before push() throws.
   * @param maxDepth nesting of objects and arrays before push() throws (messages need about 5).
   */
  constructor(
    private readonly maxBytes = 1024 * 1024,
    private readonly maxDepth = 64,
  ) {}

  /**
   * Scan the next chunk. Returns the index just past the object's closing brace, or -1 when the
   * object continues in a later chunk. After an object ends the scanner starts afresh.
   * Throws SyntaxError when the input does not start with `{` (after whitespace) and RangeError
   * when the object grows past maxBytes or nests deeper than maxDepth.
   */
  push(chunk: Uint8Array): number {
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === 0x5c) this.escaped = true;
        else if (c === 0x22) this.inString = false;
      } else if (!this.started) {
        if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
        if (c !== 0x7b) throw new SyntaxError('expected a JSON object');
        this.started = true;
        this.depth = 1;
        this.nesting = 1;
      } else if (c === 0x22) {
        this.inString = true;
      } else if (c === 0x7b || c === 0x5b) {
        if (c === 0x7b) this.depth++;
        if (++this.nesting > this.maxDepth) {
          throw new RangeError(`JSON nested deeper than ${this.maxDepth} levels`);
        }
      } else if (c === 0x5d) {
        this.nesting--;
      } else if (c === 0x7d) {
        this.nesting--;
        if (--this.depth === 0) {
          // Checked here too: an object that ends within one chunk is bounded like a longer one.
          const length = this.seen + i + 1;
          this.reset();
          if (length > this.maxBytes) {
            throw new RangeError(`JSON object longer than ${this.maxBytes} bytes`);
          }
          return i + 1;
        }
      }
    }
    this.seen += chunk.length;
    if (this.seen > this.maxBytes) {
      throw new RangeError(`JSON object longer than ${this.maxBytes} bytes`);
    }
    return -1;
  }

  /** Forget any partial object. */
  reset(): void {
    this.started = false;
    this.depth = 0;
    this.inString = false;
    this.escaped = false;
    this.seen = 0;
    this.nesting = 0;
  }
}
