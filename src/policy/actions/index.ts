import { addHeadersAction } from './add-headers.js';
import { basicAuthAction } from './basic-auth.js';
import {
  requestBodyFindReplaceAction,
  responseBodyFindReplaceAction,
  sseFindReplaceAction,
} from './body-find-replace.js';
import { circuitBreakerAction } from './circuit-breaker.js';
import { closeConnectionAction } from './close-connection.js';
import { compressResponseAction } from './compress-response.js';
import { customResponseAction } from './custom-response.js';
import { denyAction } from './deny.js';
import { forwardInternalAction } from './forward-internal.js';
import { httpRequestAction } from './http-request.js';
import { jwtValidationAction } from './jwt-validation.js';
import { logAction } from './log.js';
import { oauthAction } from './oauth.js';
import { openidConnectAction } from './openid-connect.js';
import { rateLimitAction } from './rate-limit.js';
import { redirectAction } from './redirect.js';
import { removeHeadersAction } from './remove-headers.js';
import { restrictIpsAction } from './restrict-ips.js';
import { setVarsAction } from './set-vars.js';
import { terminateTlsAction } from './terminate-tls.js';
import { urlRewriteAction } from './url-rewrite.js';
import { verifyWebhookAction } from './verify-webhook.js';
import type { ActionSpec } from './types.js';

/**
 * Every action Burrow runs, by type.
 * @example ACTIONS.get('deny')?.phases // ['on_tcp_connect', 'on_http_request']
 */
export const ACTIONS: ReadonlyMap<string, ActionSpec> = new Map(
  [
    addHeadersAction,
    basicAuthAction,
    circuitBreakerAction,
    closeConnectionAction,
    compressResponseAction,
    customResponseAction,
    denyAction,
    forwardInternalAction,
    httpRequestAction,
    jwtValidationAction,
    logAction,
    oauthAction,
    openidConnectAction,
    rateLimitAction,
    redirectAction,
    removeHeadersAction,
    requestBodyFindReplaceAction,
    responseBodyFindReplaceAction,
    restrictIpsAction,
    setVarsAction,
    sseFindReplaceAction,
    terminateTlsAction,
    urlRewriteAction,
    verifyWebhookAction,
  ].map((spec) => [spec.type, spec]),
);

/** Action types of the API Burrow follows that it does not run; named so the error can say so. */
export const UNSUPPORTED_ACTIONS = [
  'saml',
  'owasp-crs-request',
  'owasp-crs-response',
  'ai-gateway',
];

export type { ActionSpec } from './types.js';
