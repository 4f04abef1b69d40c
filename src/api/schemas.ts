import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import { utf8Length } from '../core/bytes.js';
import { textProblem, type TextKind } from '../core/text-rules.js';

/**
 * Shared TypeBox schemas, and the two keywords Burrow adds to the validator:
 * - `maxBytes`: limits are in bytes of UTF-8, which JSON Schema's `maxLength` (characters) cannot
 *   express;
 * - `plainText`: which characters a human-readable string may hold (src/core/text-rules.ts): `name`
 *   refuses control, bidirectional-formatting and zero-width characters, `text` (descriptions)
 *   allows newline and tab besides.
 * The error handler turns a failure of either into '<field>: <rule>'.
 */
export const SCHEMA_KEYWORDS = [
  {
    keyword: 'maxBytes',
    type: 'string',
    schemaType: 'number',
    validate: (max: number, data: string) => utf8Length(data) <= max,
  },
  {
    keyword: 'plainText',
    type: 'string',
    schemaType: 'string',
    validate: (kind: TextKind, data: string) => textProblem(data, kind) === undefined,
  },
] as const;

/** The byte limit of names and descriptions. */
export const NAME_MAX_BYTES = 255;

export const Description = Type.String({
  maxBytes: NAME_MAX_BYTES,
  plainText: 'text',
  description:
    'human-readable description; at most 255 bytes of UTF-8; newline and tab are the only control characters allowed, and bidirectional-formatting and zero-width characters are refused',
});
export const Metadata = Type.String({
  maxBytes: 4096,
  description: 'arbitrary machine-readable data; at most 4096 bytes of UTF-8',
});

/**
 * A name-like field: one line of at most 255 bytes of UTF-8 (unless `maxBytes` says less), with
 * no control, bidirectional-formatting or zero-width characters.
 * @example Name('unique, non-empty name')
 */
export function Name(description: string, maxBytes = NAME_MAX_BYTES) {
  return Type.String({
    maxBytes,
    plainText: 'name',
    description: `${description}; at most ${maxBytes} bytes of UTF-8, one line, no control, bidirectional-formatting or zero-width characters`,
  });
}

export const Ref = Type.Object(
  { id: Type.String(), uri: Type.String() },
  { additionalProperties: false },
);

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

/** Path parameters of item routes. */
export const IdParams = Type.Object({ id: Type.String() });

/** Query of list routes: `before_id` and `limit` (text, checked by the paging helper). */
export const ListQuery = Type.Object(
  {
    before_id: Type.Optional(Type.String({ description: 'return items created before this id' })),
    limit: Type.Optional(Type.String({ description: 'page size, 1 to 100 (default 100)' })),
  },
  { additionalProperties: false },
);

/** A list envelope schema: `{ <key>: [item], uri, next_page_uri }`. */
export function ListOf(key: string, item: TSchema): TObject {
  return Type.Object({
    [key]: Type.Array(item),
    uri: Type.String(),
    next_page_uri: Nullable(Type.String()),
  });
}

/** A request body object that refuses unknown fields (ERR_NGROK_214). */
export function Body<T extends Parameters<typeof Type.Object>[0]>(properties: T) {
  return Type.Object(properties, { additionalProperties: false });
}
