import { Duration } from '@marcbachmann/cel-js/evaluator';
import {
  ConnTsVars,
  ConnVars,
  EndpointVars,
  ReqVars,
  ResVars,
  TimeVars,
  TlsVars,
  UrlVars,
} from './variables.js';
import { REDACTED, SecretsVars, SecretText } from './secrets.js';
import { GeoVars, IpAsVars, IpGeoVars, IpInfoVars, IpLocationVars } from './ip-intel-vars.js';
import {
  ContentTypeVars,
  CookieVars,
  RequestTsVars,
  USER_AGENT_ALIASES,
  USER_AGENT_FIELDS,
  UserAgentVars,
} from './request-detail-vars.js';
import { RESPONSE_COOKIE_FIELDS, ResponseCookieVars } from './response-cookie-vars.js';
import {
  TLS_NAME_ATTRIBUTES,
  TlsClientVars,
  TlsNameVars,
  TlsSanVars,
  TlsValidityVars,
} from './tls-client-vars.js';

/**
 * The CEL object types of the environment: each variable class with its fields' CEL types, and
 * the older PascalCase names as aliases of the snake_case fields. Also how CEL values become text
 * and JSON for interpolation, logs and bucket keys.
 */

/** One CEL object type: its class, its fields (with aliases) and their CEL types. */
export interface CelTypeDeclaration {
  name: string;
  ctor: abstract new (...args: never[]) => object;
  fields: Record<string, string>;
}

/**
 * Declare `ctor` as CEL type `name`: `fields` in snake_case, and `aliases` (older PascalCase name
 * → snake_case field) defined as getters on the class so both names read the same value.
 */
function declare(
  name: string,
  ctor: CelTypeDeclaration['ctor'],
  fields: Record<string, string>,
  aliases: Record<string, string>,
): CelTypeDeclaration {
  const all = { ...fields };
  for (const [alias, target] of Object.entries(aliases)) {
    const type = fields[target];
    if (type === undefined) throw new Error(`${name}.${alias}: no field ${target}`);
    all[alias] = type;
    if (!(alias in ctor.prototype)) {
      Object.defineProperty(ctor.prototype, alias, {
        get(this: Record<string, unknown>) {
          return this[target];
        },
      });
    }
  }
  return { name, ctor, fields: all };
}

/** Every object type of the environment, dependencies first. */
export const CEL_TYPES: readonly CelTypeDeclaration[] = [
  // conn.tls.client (terminate-tls): the client certificate.
  declare(
    'ConnTlsName',
    TlsNameVars,
    Object.fromEntries(Object.keys(TLS_NAME_ATTRIBUTES).map((k) => [k, 'string'])),
    {},
  ),
  declare(
    'ConnTlsSan',
    TlsSanVars,
    Object.fromEntries(
      ['dns_names', 'email_addresses', 'ip_addresses', 'uris'].map((k) => [k, 'list<string>']),
    ),
    {},
  ),
  declare(
    'ConnTlsValidity',
    TlsValidityVars,
    { not_before: 'google.protobuf.Timestamp', not_after: 'google.protobuf.Timestamp' },
    {},
  ),
  declare(
    'ConnTlsClient',
    TlsClientVars,
    {
      subject: 'ConnTlsName',
      issuer: 'ConnTlsName',
      san: 'ConnTlsSan',
      serial_number: 'string',
      fingerprint: 'string',
      validity: 'ConnTlsValidity',
    },
    {},
  ),
  declare(
    'ConnTls',
    TlsVars,
    {
      version: 'string',
      cipher_suite: 'string',
      sni: 'string',
      negotiated_alpn: 'string',
      session_resumed: 'bool',
      client: 'ConnTlsClient',
    },
    {
      Version: 'version',
      CipherSuite: 'cipher_suite',
      SNI: 'sni',
      ServerName: 'sni',
      NegotiatedALPN: 'negotiated_alpn',
      SessionResumed: 'session_resumed',
    },
  ),
  declare(
    'ConnGeo',
    GeoVars,
    Object.fromEntries(
      ['city', 'country', 'country_code', 'latitude', 'longitude', 'radius', 'subdivision'].map(
        (k) => [k, 'string'],
      ),
    ),
    {
      City: 'city',
      Country: 'country',
      CountryCode: 'country_code',
      Latitude: 'latitude',
      Longitude: 'longitude',
      Radius: 'radius',
      Subdivision: 'subdivision',
    },
  ),
  declare('ConnTs', ConnTsVars, { start: 'google.protobuf.Timestamp' }, { Start: 'start' }),
  declare(
    'IpLocation',
    IpLocationVars,
    {
      ...Object.fromEntries(
        [
          'city',
          'country',
          'country_code',
          'subdivision',
          'subdivision_code',
          'postal_code',
          'timezone',
        ].map((k) => [k, 'string']),
      ),
      latitude: 'double',
      longitude: 'double',
      radius: 'int',
    },
    {},
  ),
  declare('IpGeo', IpGeoVars, { location: 'IpLocation' }, {}),
  declare('IpAs', IpAsVars, { number: 'int', organization: 'string' }, {}),
  declare(
    'IpInfo',
    IpInfoVars,
    { geo: 'IpGeo', as: 'IpAs', categories: 'list<string>', is_on_blocklist: 'bool' },
    {},
  ),
  declare(
    'Conn',
    ConnVars,
    {
      client_ip: 'string',
      client_port: 'int',
      server_ip: 'string',
      server_port: 'int',
      server_region: 'string',
      bytes_in: 'int',
      bytes_out: 'int',
      ts: 'ConnTs',
      tls: 'ConnTls',
      geo: 'ConnGeo',
      client_ip_info: 'IpInfo',
    },
    {
      ClientIP: 'client_ip',
      ClientPort: 'client_port',
      ServerIP: 'server_ip',
      ServerPort: 'server_port',
      ServerRegion: 'server_region',
      BytesIn: 'bytes_in',
      BytesOut: 'bytes_out',
      TS: 'ts',
      TLS: 'tls',
      Geo: 'geo',
    },
  ),
  declare(
    'Endpoint',
    EndpointVars,
    {
      id: 'string',
      url: 'string',
      host: 'string',
      port: 'int',
      protocol: 'string',
      addr: 'string',
    },
    { ID: 'id', URL: 'url', Host: 'host', Port: 'port', Protocol: 'protocol', Addr: 'addr' },
  ),
  declare(
    'Url',
    UrlVars,
    {
      raw: 'string',
      scheme: 'string',
      authority: 'string',
      host: 'string',
      port: 'int',
      path: 'string',
      raw_path: 'string',
      query: 'string',
      query_params: 'map<string, list<string>>',
      uri: 'string',
      user_password: 'string',
    },
    {
      Raw: 'raw',
      Scheme: 'scheme',
      Authority: 'authority',
      Host: 'host',
      Port: 'port',
      Path: 'path',
      RawPath: 'raw_path',
      Query: 'query',
      RawQuery: 'query',
      QueryParams: 'query_params',
    },
  ),
  declare('Cookie', CookieVars, { name: 'string', value: 'string' }, {}),
  declare('ResponseCookie', ResponseCookieVars, RESPONSE_COOKIE_FIELDS, {}),
  declare('UserAgent', UserAgentVars, USER_AGENT_FIELDS, USER_AGENT_ALIASES),
  declare('ContentType', ContentTypeVars, { raw: 'string', parameters: 'map<string, string>' }, {}),
  declare(
    'RequestTs',
    RequestTsVars,
    { header_received: 'google.protobuf.Timestamp', body_received: 'google.protobuf.Timestamp' },
    {},
  ),
  declare(
    'Request',
    ReqVars,
    {
      method: 'string',
      host: 'string',
      url: 'Url',
      version: 'string',
      headers: 'map<string, list<string>>',
      Headers: 'map<string, list<string>>',
      content_length: 'int',
      content_type: 'ContentType',
      content_encoding: 'list<string>',
      location: 'string',
      cookies: 'map<string, list<Cookie>>',
      trailers: 'map<string, list<string>>',
      user_agent: 'UserAgent',
      ts: 'RequestTs',
    },
    {
      Method: 'method',
      Host: 'host',
      URL: 'url',
      Version: 'version',
      ContentLength: 'content_length',
      ContentType: 'content_type',
      ContentEncoding: 'content_encoding',
      Location: 'location',
    },
  ),
  declare(
    'Response',
    ResVars,
    {
      status_code: 'int',
      headers: 'map<string, list<string>>',
      Headers: 'map<string, list<string>>',
      content_length: 'int',
      content_type: 'ContentType',
      cookies: 'map<string, list<ResponseCookie>>',
      location: 'string',
    },
    {
      StatusCode: 'status_code',
      ContentLength: 'content_length',
      ContentType: 'content_type',
      Location: 'location',
    },
  ),
  declare('Time', TimeVars, { now: 'google.protobuf.Timestamp' }, { Now: 'now' }),
  // No fields: only `secrets.get(vault, name)`, registered in cel.ts.
  declare('Secrets', SecretsVars, {}, {}),
  // What secrets.get gives: no fields, no functions, only == and != (cel.ts).
  declare('Secret', SecretText, {}, {}),
];

/** Values ngrok types as strings that also have fields: they read as their text. */
function isTextValue(value: unknown): value is UrlVars | ContentTypeVars | UserAgentVars {
  return (
    value instanceof UrlVars || value instanceof ContentTypeVars || value instanceof UserAgentVars
  );
}

/**
 * A CEL value as text, for `${}` interpolation, log metadata and rate-limit bucket keys.
 * @example celToString(443n) // '443'
 */
export function celToString(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value;
    case 'bigint':
    case 'number':
    case 'boolean':
      return String(value);
    case 'undefined':
      return '';
    default:
      if (value === null) return '';
      if (isTextValue(value)) return value.toString();
      // Only an outbound template reveals a secret (interpolate.ts); any other text gets this.
      if (value instanceof SecretText) return REDACTED;
      if (value instanceof Date) return value.toISOString();
      // CEL's own text of a duration: `3600s`, `1.5s`.
      if (value instanceof Duration) return value.toString();
      if (value instanceof Uint8Array) return Buffer.from(value).toString('utf8');
      return JSON.stringify(toJson(value));
  }
}

/**
 * A CEL value as plain JSON (bigints become numbers when safe, else strings; maps become objects).
 * @example toJson(new Map([['a', [1n]]])) // { a: [1] }
 */
export function toJson(value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value <= BigInt(Number.MAX_SAFE_INTEGER) && value >= BigInt(Number.MIN_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (
    isTextValue(value) ||
    value instanceof Date ||
    value instanceof Duration ||
    value instanceof Uint8Array ||
    value instanceof SecretText
  ) {
    return celToString(value);
  }
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of value) out[String(k)] = toJson(v);
    return out;
  }
  if (Array.isArray(value) || value instanceof Set) return [...value].map(toJson);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = toJson(v);
    return out;
  }
  return value;
}
