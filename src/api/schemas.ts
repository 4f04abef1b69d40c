import { Type, type TObject, type TSchema } from '@sinclair/typebox';

/**
 * Shared TypeBox schemas. `maxBytes` is a keyword Burrow adds to the validator: limits are in bytes
 * of UTF-8, which JSON Schema's `maxLength` (characters) cannot express.
 */
export const Description = Type.String({
  maxBytes: 255,
  description: 'human-readable description; at most 255 bytes of UTF-8',
});
export const Metadata = Type.String({
  maxBytes: 4096,
  description: 'arbitrary machine-readable data; at most 4096 bytes of UTF-8',
});

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
