import { BurrowError, CODES } from '../core/errors.js';

/**
 * Errors of the device agent, all BurrowErrors (src/core/errors.ts). The local REST API answers every failure with a JSON body
 * `{ "error": "<what was wrong and how to fix it>", "code"?: "ERR_NGROK_nnn", "field"?: "<name>" }`;
 * startup problems stop the agent before it serves anything.
 */

/** The JSON body of every error reply of the local API. */
export interface AgentErrorBody {
  error: string;
  /** The server's or the policy engine's `ERR_NGROK_nnn`, when there is one. */
  code?: string;
  /** The request field that was wrong. */
  field?: string;
}

/**
 * A failed local API request: its HTTP status (`status`, the same as `statusCode`) and JSON body.
 * @example throw new AgentApiError(404, `no tunnel has the url_part 'x'`);
 */
export class AgentApiError extends BurrowError {
  readonly field: string | undefined;

  constructor(
    status: number,
    message: string,
    details: { code?: string; field?: string } = {},
    options?: { cause?: unknown },
  ) {
    super(details.code, status, message, details.field ? { field: details.field } : {}, options);
    this.field = details.field;
  }

  /** The HTTP status of the reply. */
  get status(): number {
    return this.statusCode;
  }

  /** The reply body. */
  body(): AgentErrorBody {
    const body: AgentErrorBody = { error: this.message };
    if (this.code !== undefined) body.code = this.code;
    if (this.field !== undefined) body.field = this.field;
    return body;
  }
}

/**
 * A problem that stops the agent at start (bad flags, an invalid default policy, a corrupt state
 * file): the CLI prints the message and exits 2. The message names the file or flag to fix. Its
 * code is `ERR_BURROW_AGENT_STARTUP`.
 * @example throw new AgentStartupError('--expose needs --api-token (or BURROW_AGENT_API_TOKEN)');
 */
export class AgentStartupError extends BurrowError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(CODES.agentStartup, 500, message, {}, options);
  }
}
