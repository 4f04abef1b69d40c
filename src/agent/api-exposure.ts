/**
 * `burrow agent --expose <domain>`: the agent's own REST API served through an http tunnel, so it
 * can be managed from elsewhere. Bound with the session's other tunnels and retried until the
 * server accepts it; a refusal that retrying cannot fix (the domain is not the agent's) is fatal.
 */
import type { RequestListener } from 'node:http';
import type { Logger } from '../core/logger.js';
import type { Endpoint, Session } from '../sdk/index.js';
import { defaultPolicyFor, type DefaultPolicy } from './policy.js';
import { ALREADY_ONLINE, describeError, isRefusal } from './tunnel-endpoints.js';

export interface ApiExposureOptions {
  domain: string;
  handler: RequestListener;
  defaultPolicy: DefaultPolicy | undefined;
  logger: Logger;
  /** Wait between attempts, in ms. */
  retryMs: number;
  /** The server refused the domain for good. */
  onFatal(error: Error): void;
}

/**
 * @example
 * const exposure = new ApiExposure({ domain, handler, defaultPolicy, logger, retryMs: 1500, onFatal });
 * await exposure.bind(session);
 */
export class ApiExposure {
  private endpoint: Endpoint | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: ApiExposureOptions) {}

  /** The public URL, once bound. */
  get url(): string | undefined {
    return this.endpoint?.url;
  }

  /** Bind the API's endpoint on `session`; failures are retried or reported, never thrown. */
  async bind(session: Session): Promise<void> {
    if (this.closed) return;
    const { domain, logger } = this.options;
    try {
      this.endpoint = await session.httpEndpoint({
        domain,
        trafficPolicy: defaultPolicyFor(this.options.defaultPolicy, 'http'),
        forward: this.options.handler,
        metadata: 'burrow agent API',
      });
      logger.info({ url: this.endpoint.url }, 'agent API exposed');
    } catch (err) {
      if (this.closed) return;
      if (isRefusal(err) && err.code !== ALREADY_ONLINE) {
        this.options.onFatal(
          new Error(
            `the server refused to expose the agent API on ${domain}: ${describeError(err)}`,
          ),
        );
        return;
      }
      logger.warn({ err: describeError(err) }, 'cannot expose the agent API yet; retrying');
      this.retry = setTimeout(() => void this.bind(session), this.options.retryMs);
    }
  }

  /** Stop retrying; the endpoint closes with its session. */
  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
  }
}
