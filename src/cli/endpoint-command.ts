/**
 * `burrow endpoint create|list|delete`: cloud endpoints through the management API (not the
 * database), so the command works against any server the API key opens, local or remote.
 */
import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { fetchFailure } from './ca-config.js';
import { describeCommand } from './command-index.js';

/** Where the API is and how to sign in to it. */
export interface ApiTarget {
  apiUrl: string;
  apiKey: string;
}

/** One endpoint as the API lists it (the fields the CLI shows). */
interface EndpointRow {
  id: string;
  type: string;
  url: string;
  bindings: string[];
  pooling_enabled: boolean;
  description: string;
}

/**
 * Call the management API; a non-2xx answer throws its message and code.
 * @example await callApi(target, 'GET', '/endpoints')
 */
export async function callApi(
  target: ApiTarget,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const base = target.apiUrl.replace(/\/$/, '');
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${target.apiKey}`,
        'service-version': '2',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new Error(
      `the API at ${base} cannot be reached (${fetchFailure(err)}); check --api-url (BURROW_API_URL) and that burrow server runs there`,
    );
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    throw new Error(
      `${base} answered HTTP ${res.status} with something other than JSON; check that --api-url (BURROW_API_URL) is the management API's address`,
    );
  }
  if (!res.ok) {
    const err = (parsed ?? {}) as { msg?: string; error_code?: string };
    throw new Error(
      `${err.msg ?? `HTTP ${res.status}`}${err.error_code ? ` (${err.error_code})` : ''}`,
    );
  }
  return parsed;
}

/** The API of a server run with its defaults (`--api-listen 127.0.0.1:4000`). */
const DEFAULT_API_URL = 'http://127.0.0.1:4000';

function targetOf(opts: { apiUrl?: string; apiKey?: string }): ApiTarget {
  if (!opts.apiKey) {
    throw new Error(
      'an API key is needed: pass --api-key or set BURROW_API_KEY (burrow api-key create makes one)',
    );
  }
  return { apiUrl: opts.apiUrl ?? DEFAULT_API_URL, apiKey: opts.apiKey };
}

function withApi(cmd: Command): Command {
  return cmd
    .addOption(
      new Option('--api-url <url>', 'management API base URL')
        .env('BURROW_API_URL')
        .default(DEFAULT_API_URL),
    )
    .addOption(new Option('--api-key <key>', 'API key').env('BURROW_API_KEY'));
}

/**
 * Register `burrow endpoint …`.
 * @example registerEndpointCommand(program); // burrow endpoint create https://app.example.com --traffic-policy-file policy.yml
 */
export function registerEndpointCommand(program: Command): void {
  const endpoint = program.command('endpoint').description(describeCommand('endpoint'));
  withApi(
    endpoint
      .command('create <url>')
      .description('create a cloud endpoint (https://name, tcp://host:port, https://name.internal)')
      .option('--traffic-policy <text>', 'the traffic policy, YAML or JSON')
      .option('--traffic-policy-file <file>', 'read the traffic policy from a file')
      .option('--binding <binding>', 'public or internal (default: from the URL)')
      .option('--pooling', 'share the URL with other endpoints that pool')
      .option('--description <text>', 'description')
      .option('--metadata <text>', 'metadata'),
  ).action(async (url: string, opts: Record<string, string | boolean | undefined>) => {
    const policy =
      typeof opts.trafficPolicyFile === 'string'
        ? readFileSync(opts.trafficPolicyFile, 'utf8')
        : (opts.trafficPolicy as string | undefined);
    const created = (await callApi(targetOf(opts), 'POST', '/endpoints', {
      type: 'cloud',
      url,
      ...(policy !== undefined ? { traffic_policy: policy } : {}),
      ...(typeof opts.binding === 'string' ? { bindings: [opts.binding] } : {}),
      ...(opts.pooling ? { pooling_enabled: true } : {}),
      ...(typeof opts.description === 'string' ? { description: opts.description } : {}),
      ...(typeof opts.metadata === 'string' ? { metadata: opts.metadata } : {}),
    })) as EndpointRow;
    process.stdout.write(`${created.id}\t${created.url}\n`);
  });
  withApi(endpoint.command('list').description('list cloud and agent endpoints')).action(
    async (opts: { apiKey?: string; apiUrl?: string }) => {
      const target = targetOf(opts);
      let path: string | null = '/endpoints?limit=100';
      while (path) {
        const page = (await callApi(target, 'GET', path)) as {
          endpoints: EndpointRow[];
          next_page_uri: string | null;
        };
        for (const e of page.endpoints) {
          const pool = e.pooling_enabled ? ' pooled' : '';
          process.stdout.write(
            `${e.id}\t${e.type}\t${e.url}\t${e.bindings.join(',')}${pool}\t${e.description}\n`,
          );
        }
        path = page.next_page_uri
          ? new URL(page.next_page_uri).pathname + new URL(page.next_page_uri).search
          : null;
      }
    },
  );
  withApi(endpoint.command('delete <id>').description('delete a cloud endpoint')).action(
    async (id: string, opts: { apiKey?: string; apiUrl?: string }) => {
      await callApi(targetOf(opts), 'DELETE', `/endpoints/${encodeURIComponent(id)}`);
      process.stderr.write(`Deleted ${id}.\n`);
    },
  );
}
