import { randomBytes } from 'node:crypto';
import { CODES, ValidationError } from '../core/errors.js';
import { ID_PREFIX, newId } from '../core/ids.js';
import type { RepoDeps } from './deps.js';
import { describedChanges, describedColumns, type DescribedInput } from './described.js';
import { ResourceRepository } from './resource-repository.js';
import type { EventDestinationsTable } from './schema.js';
import { newSecretKey, openSecret, sealSecret } from './secret-box.js';
import type { SettingsRepository } from './settings.js';

/** The kinds of destination, as the `target` object's one key names them. */
export const DESTINATION_KINDS = ['webhook', 'file', 'opentelemetry'] as const;
export type DestinationKind = (typeof DESTINATION_KINDS)[number];

/**
 * How an OpenTelemetry destination encodes its OTLP/HTTP requests, as the standard
 * `OTEL_EXPORTER_OTLP_PROTOCOL` names them; protobuf is the specification's default.
 */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

/** A destination's settings as the API takes them: exactly one kind set. */
export interface EventTarget {
  webhook?: { url: string } | undefined;
  file?: { path: string } | undefined;
  opentelemetry?:
    | {
        url: string;
        /** Write-only (they often carry an API key): stored sealed, never shown. */
        headers?: Record<string, string> | undefined;
        /** What views show of the headers: their names. */
        header_names?: string[] | undefined;
        /** `http/protobuf` (the default) or `http/json`; stored normalised, so views show it. */
        protocol?: OtlpProtocol | undefined;
        /** The OTLP/HTTP traces endpoint: with it, each request is also sent as a span. */
        traces_url?: string | undefined;
      }
    | undefined;
}

/** A destination as the API shows it (never with its signing secret, except right after create). */
export interface EventDestination {
  id: string;
  description: string;
  metadata: string;
  created_at: string;
  format: string;
  kind: DestinationKind;
  target: EventTarget;
  /** A webhook's signing secret: only in the answer to its create. */
  signing_secret?: string | undefined;
}

export interface EventDestinationCreate extends DescribedInput {
  format?: string | undefined;
  target: EventTarget;
}

export type EventDestinationUpdate = Partial<EventDestinationCreate>;

/**
 * What the edge delivers with: the destination with its secrets in clear (a webhook's signing
 * secret, an OpenTelemetry destination's headers).
 */
export interface DestinationDelivery {
  id: string;
  kind: DestinationKind;
  target: EventTarget;
  signingSecret?: string | undefined;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function httpUrl(value: string, field: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(CODES.invalidValue, field, 'must be an absolute http or https URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ValidationError(CODES.invalidValue, field, 'must be an http or https URL');
  }
  if (url.username || url.password) {
    // Credentials in a URL end up in logs; headers are the place for them.
    throw new ValidationError(CODES.invalidValue, field, 'must not carry a user or password');
  }
  return url.href;
}

/**
 * The kind and normalised settings of `target`; a problem is thrown naming the field and rule.
 * @example checkTarget({ file: { path: '/var/log/burrow/events.jsonl' } }) // ['file', { file: … }]
 */
export function checkTarget(target: EventTarget): [DestinationKind, EventTarget] {
  const kinds = DESTINATION_KINDS.filter((k) => target[k] !== undefined);
  if (kinds.length !== 1) {
    throw new ValidationError(
      CODES.invalidValue,
      'target',
      `must set exactly one of ${DESTINATION_KINDS.join(', ')}`,
    );
  }
  const kind = kinds[0]!;
  if (target.webhook) {
    return [kind, { webhook: { url: httpUrl(target.webhook.url, 'target.webhook.url') } }];
  }
  if (target.file) {
    const path = target.file.path;
    if (!path.startsWith('/') || path.includes('\0') || path.split('/').includes('..')) {
      throw new ValidationError(CODES.invalidValue, 'target.file.path', 'must be an absolute path');
    }
    // The server appends text a visitor partly chose (request paths): only to files named as
    // event logs, never to a shell profile, an authorized_keys, a cron file or the database.
    if (!path.endsWith('.jsonl')) {
      throw new ValidationError(CODES.invalidValue, 'target.file.path', 'must end in .jsonl');
    }
    return [kind, { file: { path } }];
  }
  const otel = target.opentelemetry!;
  const headers = otel.headers ?? {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name) || /[\r\n\0]/.test(value)) {
      throw new ValidationError(
        CODES.invalidValue,
        `target.opentelemetry.headers.${name}`,
        'must be an HTTP header name with a value of one line',
      );
    }
  }
  const url = httpUrl(otel.url, 'target.opentelemetry.url');
  const protocol = otel.protocol ?? 'http/protobuf';
  if (!OTLP_PROTOCOLS.includes(protocol)) {
    throw new ValidationError(
      CODES.invalidValue,
      'target.opentelemetry.protocol',
      `must be one of ${OTLP_PROTOCOLS.join(', ')}`,
    );
  }
  const traces =
    otel.traces_url === undefined || otel.traces_url === ''
      ? {}
      : { traces_url: httpUrl(otel.traces_url, 'target.opentelemetry.traces_url') };
  return [kind, { opentelemetry: { url, headers, protocol, ...traces } }];
}

function checkFormat(format: string | undefined): string {
  if (format !== undefined && format !== 'json') {
    throw new ValidationError(CODES.invalidValue, 'format', 'must be json');
  }
  return 'json';
}

function viewOf(row: EventDestinationsTable): EventDestination {
  const target = JSON.parse(row.target) as EventTarget;
  // Destinations stored before the protocol could be chosen are sent the default.
  if (target.opentelemetry) target.opentelemetry.protocol ??= 'http/protobuf';
  return {
    id: row.id,
    description: row.description,
    metadata: row.metadata,
    created_at: row.created_at,
    format: row.format,
    kind: row.kind as DestinationKind,
    target,
  };
}

/**
 * Event destinations. A webhook's signing secret is made here, shown once in the create's answer
 * and stored encrypted (secret-box.ts, the vaults' key), as are an OpenTelemetry destination's
 * headers (write-only, their names shown): unlike a password a secret the edge sends cannot be hashed,
 * since every delivery signs with it. Deleting a destination takes it out of every subscription.
 * @example const d = await repo.create({ target: { webhook: { url: 'https://hooks.example/burrow' } } });
 */
export class EventDestinationRepository extends ResourceRepository<
  'event_destinations',
  EventDestination
> {
  private readonly settings: SettingsRepository;

  constructor(deps: RepoDeps) {
    super(deps.db, 'event_destinations', viewOf);
    this.settings = deps.accountSettings;
  }

  async create(input: EventDestinationCreate): Promise<EventDestination> {
    const format = checkFormat(input.format);
    const [kind, target] = checkTarget(input.target);
    const id = newId(ID_PREFIX.eventDestination);
    const secret = kind === 'webhook' ? `whsec_${randomBytes(24).toString('base64url')}` : null;
    const row: EventDestinationsTable = {
      id,
      ...describedColumns(input),
      format,
      kind,
      ...(await this.sealedTarget(id, target)),
    };
    if (secret) row.secret_encrypted = sealSecret(await this.key(), id, secret);
    await this.db.insertInto('event_destinations').values(row).execute();
    return { ...viewOf(row), ...(secret ? { signing_secret: secret } : {}) };
  }

  async update(id: string, patch: EventDestinationUpdate): Promise<EventDestination | undefined> {
    const set: Partial<EventDestinationsTable> = describedChanges(patch);
    if (patch.format !== undefined) set.format = checkFormat(patch.format);
    if (patch.target !== undefined) {
      const [kind, target] = checkTarget(patch.target);
      const current = await this.get(id);
      if (!current) return undefined;
      // The secret belongs to the webhook kind: changing kind would leave one without a secret.
      if (current.kind !== kind) {
        throw new ValidationError(
          CODES.invalidValue,
          'target',
          `must keep the kind ${current.kind}; create a new destination for a ${kind}`,
        );
      }
      // A webhook keeps its signing secret; OpenTelemetry headers are replaced with the target.
      const sealed = await this.sealedTarget(id, target);
      set.target = sealed.target;
      if (kind === 'opentelemetry') set.secret_encrypted = sealed.secret_encrypted;
    }
    await this.writeColumns(id, set);
    return this.get(id);
  }

  async delete(id: string): Promise<boolean> {
    return this.deleteChecked(id, async (trx) => {
      const subs = await trx
        .selectFrom('event_subscriptions')
        .select(['id', 'destination_ids'])
        .execute();
      for (const sub of subs) {
        const ids = JSON.parse(sub.destination_ids) as string[];
        if (!ids.includes(id)) continue;
        await trx
          .updateTable('event_subscriptions')
          .set({ destination_ids: JSON.stringify(ids.filter((d) => d !== id)) })
          .where('id', '=', sub.id)
          .execute();
      }
    });
  }

  /** Every destination with its secret in clear, for the edge. Never hand these to the API. */
  async deliveries(): Promise<DestinationDelivery[]> {
    const rows = await this.db.selectFrom('event_destinations').selectAll().orderBy('id').execute();
    const key = rows.some((r) => r.secret_encrypted) ? await this.key() : '';
    return rows.map((row) => {
      const target = JSON.parse(row.target) as EventTarget;
      const secret = row.secret_encrypted
        ? openSecret(key, row.id, row.secret_encrypted)
        : undefined;
      const otel = target.opentelemetry;
      if (!otel)
        return { id: row.id, kind: row.kind as DestinationKind, target, signingSecret: secret };
      // An OpenTelemetry destination's sealed secret is its headers, as JSON (sealedTarget).
      const headers = secret ? (JSON.parse(secret) as Record<string, string>) : {};
      const { url, protocol = 'http/protobuf', traces_url } = otel;
      return {
        id: row.id,
        kind: 'opentelemetry',
        target: { opentelemetry: { url, headers, protocol, traces_url } },
      };
    });
  }

  /**
   * The stored form of a checked target: OpenTelemetry headers leave it for `secret_encrypted`
   * (sealed JSON) and only their names stay; other kinds are stored as they are.
   */
  private async sealedTarget(
    id: string,
    target: EventTarget,
  ): Promise<Pick<EventDestinationsTable, 'target' | 'secret_encrypted'>> {
    if (!target.opentelemetry) return { target: JSON.stringify(target), secret_encrypted: null };
    const { headers = {}, ...settings } = target.opentelemetry;
    const names = Object.keys(headers);
    return {
      target: JSON.stringify({ opentelemetry: { ...settings, header_names: names } }),
      secret_encrypted:
        names.length > 0 ? sealSecret(await this.key(), id, JSON.stringify(headers)) : null,
    };
  }

  private key(): Promise<string> {
    return this.settings.getOrCreate('secrets_key', newSecretKey);
  }
}
