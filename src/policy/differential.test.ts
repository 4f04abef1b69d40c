import {
  celEnv,
  celFunc,
  CelScalar,
  isCelError,
  isCelList,
  isCelMap,
  listType,
  parse,
  plan,
  type CelFunc,
} from '@bufbuild/cel';
import { isMessage } from '@bufbuild/protobuf';
import { timestampDate, TimestampSchema, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from 'vitest';
import {
  CONN_TLS12,
  CONN_TLS13,
  fixtureExpressions,
  SAMPLE_REQUEST,
  SAMPLE_RESPONSE,
} from '../../test/support/policy-fixtures.js';
import { compileExpression, inCidrRange } from './cel.js';
import { CEL_TYPES } from './cel-types.js';
import { ContentTypeVars } from './request-detail-vars.js';
import {
  ConnVars,
  EndpointVars,
  ReqVars,
  ResVars,
  TimeVars,
  type Activation,
  type ConnInput,
  type RequestInput,
  type ResponseInput,
} from './variables.js';

/**
 * Differential test: every expression of the fixtures is evaluated by Burrow's engine
 * (@marcbachmann/cel-js with Burrow's variables and functions) and by an independent CEL
 * implementation (@bufbuild/cel, with its own parser, evaluator and RE2), over the same data, and
 * the two must agree on the value, or both fail.
 *
 * @bufbuild/cel gets the variables as plain maps read from Burrow's variable classes (both the
 * snake_case fields and their PascalCase aliases), and the functions (getReqHeader, inCidrRange,
 * ...) as host functions over the same data. Left out, by rule rather than by list: expressions
 * that use `req.url` itself as a string (`req.url == '…'`, `req.url.contains(…)`), because
 * there it is a Burrow type that compares with strings, which a map cannot do.
 */

const URL_FIELDS =
  'raw|scheme|host|port|path|raw_path|query|query_params|Raw|Scheme|Host|Port|Path|RawPath|Query|RawQuery|QueryParams';
const URL_AS_STRING = new RegExp(`\\breq\\.(url|URL)\\b(?!\\.(${URL_FIELDS})\\b)`);

const CTORS = new Map<unknown, string[]>(CEL_TYPES.map((t) => [t.ctor, Object.keys(t.fields)]));

/** A Burrow CEL value as @bufbuild/cel input: objects become maps of their declared fields. */
function toBufbuild(value: unknown): unknown {
  if (value instanceof Date) return timestampFromDate(value);
  // A content type is its media type where the fixtures read it (its fields are tested apart).
  if (value instanceof ContentTypeVars) return value.toString();
  if (Array.isArray(value)) return value.map(toBufbuild);
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [k, toBufbuild(v)]));
  if (value !== null && typeof value === 'object') {
    const fields = CTORS.get(value.constructor) ?? Object.keys(value);
    const source = value as Record<string, unknown>;
    return new Map(fields.map((f) => [f, toBufbuild(source[f])]));
  }
  return value;
}

/** Both engines' results in one shape, for comparison. */
function normalize(value: unknown): unknown {
  if (isCelList(value) || Array.isArray(value)) return [...value].map(normalize);
  if (isCelMap(value) || value instanceof Map) {
    return Object.fromEntries([...value.entries()].map(([k, v]) => [String(k), normalize(v)]));
  }
  if (value instanceof Date) return value.toISOString();
  if (isMessage(value, TimestampSchema)) return timestampDate(value).toISOString();
  return value;
}

interface Scenario {
  name: string;
  conn: ConnInput;
  req: RequestInput;
  res: ResponseInput;
  vars: Record<string, unknown>;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'TLS 1.3 POST',
    conn: CONN_TLS13,
    req: SAMPLE_REQUEST,
    res: SAMPLE_RESPONSE,
    vars: { tier: 'gold' },
  },
  {
    name: 'TLS 1.2 bot GET',
    conn: { ...CONN_TLS12, client_ip: '10.1.2.3', client_port: 443 },
    req: {
      method: 'GET',
      url: '/admin/docs/v1/x?debug=true',
      scheme: 'http',
      headers: {
        host: 'other.example.com:8080',
        'user-agent': 'somebot/1.0',
        'x-internal-secret': 's',
      },
    },
    res: { status_code: 200, headers: { 'content-type': 'application/json' } },
    vars: {},
  },
  {
    name: 'IPv6 plain',
    conn: { client_ip: '2001:db8::5', client_port: 40000 },
    req: { method: 'TRACE', url: '/', headers: { host: 'app.example.com' } },
    res: { status_code: 503, headers: {} },
    vars: { tier: 'silver' },
  },
];

function burrowActivation(s: Scenario): Activation {
  return {
    conn: new ConnVars(s.conn),
    endpoint: new EndpointVars({ host: 'app.example.com', port: 443 }),
    time: new TimeVars(() => Date.parse('2025-06-01T00:00:00Z')),
    vars: s.vars,
    req: new ReqVars(s.req),
    res: new ResVars(s.res),
  };
}

/** The functions Burrow adds, as host functions of @bufbuild/cel over `act`. */
function bufbuildFunctions(act: Activation): CelFunc[] {
  const str = CelScalar.STRING;
  const strings = listType(str);
  const req = act.req!;
  const res = act.res!;
  return [
    celFunc('getReqHeader', [str], strings, (n) => req.header(n)),
    celFunc('hasReqHeader', [str], CelScalar.BOOL, (n) => req.header(n).length > 0),
    celFunc('getResHeader', [str], strings, (n) => res.header(n)),
    celFunc('hasResHeader', [str], CelScalar.BOOL, (n) => res.header(n).length > 0),
    celFunc('getQueryParam', [str], strings, (n) => req.url.query_params.get(n) ?? []),
    celFunc('hasQueryParam', [str], CelScalar.BOOL, (n) => req.url.query_params.has(n)),
    celFunc('inCidrRange', [str, str], CelScalar.BOOL, (ip, cidr) => inCidrRange(ip, cidr)),
    celFunc('inCidrRanges', [str, strings], CelScalar.BOOL, (ip, cidrs) =>
      [...cidrs].some((c) => typeof c === 'string' && inCidrRange(ip, c)),
    ),
  ];
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: string };

function viaBurrow(
  source: string,
  phase: Parameters<typeof compileExpression>[1],
  act: Activation,
): Outcome {
  const expr = compileExpression(source, phase, 'value');
  try {
    return { ok: true, value: normalize(expr.evaluate(act)) };
  } catch (err) {
    return { ok: false, error: (err as Error).message.split('\n')[0]! };
  }
}

function viaBufbuild(source: string, act: Activation): Outcome {
  const env = celEnv({ funcs: bufbuildFunctions(act) });
  const bindings: Record<string, unknown> = {};
  for (const name of ['conn', 'endpoint', 'time', 'vars', 'req', 'res'] as const) {
    bindings[name] = toBufbuild(act[name]);
  }
  // The bindings are maps built above; @bufbuild/cel's input type is a union we have matched.
  const result = plan(env, parse(source))(bindings as Parameters<ReturnType<typeof plan>>[0]);
  if (isCelError(result)) return { ok: false, error: result.message };
  return { ok: true, value: normalize(result) };
}

const all = fixtureExpressions();
const compared = all.filter((e) => !URL_AS_STRING.test(e.source));

describe('differential: Burrow CEL vs @bufbuild/cel', () => {
  it('covers the fixtures: most expressions are compared, the rest use req.url as a string', () => {
    expect(compared.length).toBeGreaterThan(50);
    for (const skipped of all.filter((e) => !compared.includes(e))) {
      expect(skipped.source).toMatch(URL_AS_STRING);
    }
  });

  describe.each(SCENARIOS)('$name', (scenario) => {
    it.each(compared.map((e) => [e.source, e.phase] as const))('%s', (source, phase) => {
      const act = burrowActivation(scenario);
      const burrow = viaBurrow(source, phase, act);
      const bufbuild = viaBufbuild(source, burrowActivation(scenario));
      if (!burrow.ok || !bufbuild.ok) {
        // Both engines must fail together (e.g. indexing a header the request lacks).
        expect({ burrow: burrow.ok, bufbuild: bufbuild.ok }).toEqual({
          burrow: false,
          bufbuild: false,
        });
        return;
      }
      expect(burrow.value).toEqual(bufbuild.value);
    });
  });
});
