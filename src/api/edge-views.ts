import type { Static } from '@sinclair/typebox';
import type { Edge, EdgeModules, ModuleName } from '../store/edges.js';
import type { MODULE_SCHEMAS } from './edge-schemas.js';
import type { Uris } from './uris.js';

/** A module in its reply shape (MODULE_SCHEMAS' `reply`), whichever module it is. */
export type ModuleView = Static<(typeof MODULE_SCHEMAS)[ModuleName]['reply']>;

/**
 * One module in its reply shape (ids become refs), or null when unset.
 * @example moduleView(uris, edge, 'backend') // { enabled: true, backend: { id, uri } }
 */
export function moduleView(uris: Uris, modules: EdgeModules, name: ModuleName): ModuleView | null {
  switch (name) {
    case 'backend': {
      const m = modules.backend;
      return m && { enabled: m.enabled, backend: uris.ref(m.backend_id) };
    }
    case 'ip_restriction': {
      const m = modules.ip_restriction;
      return m && { enabled: m.enabled, ip_policies: m.ip_policy_ids.map((id) => uris.ref(id)) };
    }
    case 'mutual_tls': {
      const m = modules.mutual_tls;
      return (
        m && {
          enabled: m.enabled,
          certificate_authorities: m.certificate_authority_ids.map((id) => uris.ref(id)),
        }
      );
    }
    case 'tls_termination': {
      const m = modules.tls_termination;
      return m && { enabled: m.enabled, terminate_at: m.terminate_at, min_version: m.min_version };
    }
    case 'traffic_policy': {
      const m = modules.traffic_policy;
      return m && { enabled: m.enabled, value: m.value };
    }
  }
}

/** An edge in its reply shape; `policy` is always null (docs/api/edges.md says why). */
export function edgeView(uris: Uris, edge: Edge): Record<string, unknown> {
  const view: Record<string, unknown> = {
    id: edge.id,
    uri: uris.of(edge.id),
    description: edge.description,
    metadata: edge.metadata,
    created_at: edge.created_at,
    hostports: edge.hostports,
    backend: moduleView(uris, edge, 'backend'),
    ip_restriction: moduleView(uris, edge, 'ip_restriction'),
  };
  if (edge.type === 'tls') {
    view.mutual_tls = moduleView(uris, edge, 'mutual_tls');
    view.tls_termination = moduleView(uris, edge, 'tls_termination');
  }
  view.traffic_policy = moduleView(uris, edge, 'traffic_policy');
  view.policy = null;
  return view;
}
