import { nowRfc3339 } from './paging.js';

/** What create and PATCH take for the description and metadata every resource carries. */
export interface DescribedInput {
  description?: string | undefined;
  metadata?: string | undefined;
}

/** The columns every resource row starts with, besides its id. */
export interface DescribedColumns {
  description: string;
  metadata: string;
  created_at: string;
}

/**
 * The shared columns of a new row: description and metadata default to empty, created now.
 * @example const row = { id: newId(ID_PREFIX.ipPolicy), ...describedColumns(input) };
 */
export function describedColumns(
  input: DescribedInput,
  createdAt = nowRfc3339(),
): DescribedColumns {
  return {
    description: input.description ?? '',
    metadata: input.metadata ?? '',
    created_at: createdAt,
  };
}

/**
 * The shared columns a PATCH changes: only the ones it sent, so an empty PATCH changes nothing.
 * @example const set: Partial<IpPoliciesTable> = describedChanges({ metadata: '{}' }); // { metadata: '{}' }
 */
export function describedChanges(patch: DescribedInput): Partial<DescribedColumns> {
  const set: Partial<DescribedColumns> = {};
  if (patch.description !== undefined) set.description = patch.description;
  if (patch.metadata !== undefined) set.metadata = patch.metadata;
  return set;
}

/**
 * The shared columns of a stored row, to spread into its view after the id (and type), in the
 * order every view shows them.
 * @example return { id: row.id, ...describedOf(row), addr: row.addr };
 */
export function describedOf(row: DescribedColumns): DescribedColumns {
  return { description: row.description, metadata: row.metadata, created_at: row.created_at };
}
