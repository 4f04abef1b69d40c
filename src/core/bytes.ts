/** Length of `text` in bytes of UTF-8, the unit every Burrow size limit is written in. */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
