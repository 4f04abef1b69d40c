import { createContext, useContext } from 'react';

/** A dashboard user's role (src/core/roles.ts): what the API lets them do. */
export type Role = 'admin' | 'operator' | 'viewer';

/**
 * Whether the signed-in person may change what the current page shows. The API refuses what a
 * role does not allow either way; this only keeps buttons that would be refused off the page.
 */
export const CanChangeContext = createContext(true);

/** False where the signed-in person's role cannot change the page's resources. */
export function useCanChange(): boolean {
  return useContext(CanChangeContext);
}

/** Pages only some roles may change; every other page can be changed by admins and operators. */
const ADMIN_CHANGES: ReadonlySet<string> = new Set(['bot-users', 'users']);

/** Whether `role` may change the resources of page `page`. */
export function canChangePage(role: Role, page: string): boolean {
  if (role === 'admin') return true;
  if (role === 'viewer') return false;
  return !ADMIN_CHANGES.has(page);
}

/** Pages a role sees at all: users are for admins only. */
export function seesPage(role: Role, page: string): boolean {
  return page !== 'users' || role === 'admin';
}
