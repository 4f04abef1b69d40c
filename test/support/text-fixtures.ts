/** Characters that names must not hold (src/core/text-rules.ts), shared by the tests of each layer. */

/** Bidirectional-formatting characters: embeddings, overrides and isolates. */
export const BIDI = [
  '\u202A',
  '\u202B',
  '\u202C',
  '\u202D',
  '\u202E',
  '\u2066',
  '\u2067',
  '\u2068',
  '\u2069',
];

/** Zero-width characters and the byte-order mark. */
export const ZERO_WIDTH = ['\u200B', '\u200C', '\u200D', '\uFEFF'];
