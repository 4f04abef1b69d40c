/**
 * A minimal `Reflect` metadata API (defineMetadata / getOwnMetadata / getMetadata), enough for
 * tsyringe, which @peculiar/x509 uses internally. Installed only where the functions are missing;
 * if the `reflect-metadata` package is ever added, importing it first makes this a no-op.
 * @example import './reflect-metadata-shim.js'; // before importing @peculiar/x509
 */
type MetadataKey = unknown;
type PropertyKeyOrNone = string | symbol | undefined;

const metadata = new WeakMap<object, Map<PropertyKeyOrNone, Map<MetadataKey, unknown>>>();

function table(
  target: object,
  property: PropertyKeyOrNone,
  create: boolean,
): Map<MetadataKey, unknown> | undefined {
  let byProperty = metadata.get(target);
  if (!byProperty) {
    if (!create) return undefined;
    byProperty = new Map();
    metadata.set(target, byProperty);
  }
  let entries = byProperty.get(property);
  if (!entries && create) {
    entries = new Map();
    byProperty.set(property, entries);
  }
  return entries;
}

const reflect = Reflect as unknown as Record<string, unknown>;

if (typeof reflect.getMetadata !== 'function') {
  reflect.defineMetadata = (
    key: MetadataKey,
    value: unknown,
    target: object,
    property?: string | symbol,
  ): void => {
    table(target, property, true)!.set(key, value);
  };
  reflect.getOwnMetadata = (
    key: MetadataKey,
    target: object,
    property?: string | symbol,
  ): unknown => table(target, property, false)?.get(key);
  // Metadata is inherited along the prototype chain, as in the metadata proposal.
  reflect.getMetadata = (key: MetadataKey, target: object, property?: string | symbol): unknown => {
    for (let o: object | null = target; o !== null; o = Object.getPrototypeOf(o) as object | null) {
      const entries = table(o, property, false);
      if (entries?.has(key)) return entries.get(key);
    }
    return undefined;
  };
}

export {};
