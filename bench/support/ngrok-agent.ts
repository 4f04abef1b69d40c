/** Sessions of the unmodified `@ngrok/ngrok` agent, as benchmark roles open them. */
import { readFileSync } from 'node:fs';
import ngrok from '@ngrok/ngrok';
import type { EdgeAddress } from './sdk-agent.js';

/**
 * A new `@ngrok/ngrok` session to the edge at `spec` (its own, not `ngrok.forward()`'s shared
 * one), trusting the edge's CA.
 * @example const session = await connectNgrok(spec); await session.httpEndpoint().listenAndForward(url);
 */
export function connectNgrok(spec: EdgeAddress): Promise<ngrok.Session> {
  return new ngrok.SessionBuilder()
    .serverAddr(spec.serverAddr)
    .caCert(readFileSync(spec.caFile))
    .authtoken(spec.token)
    .connect();
}
