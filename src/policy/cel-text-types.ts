import type { Environment } from '@marcbachmann/cel-js';
import { compileRegex, RE2_MATCHES } from './regex.js';
import type { ContentTypeVars, UserAgentVars } from './request-detail-vars.js';
import type { UrlVars } from './url-vars.js';

/**
 * Variables ngrok types as strings that also have fields (`req.url.path`,
 * `req.content_type.raw`, `req.user_agent.os`): here they are objects that read as text.
 */

/** A variable that reads as text: `req.url`, `req.content_type` (the media type), `req.user_agent`. */
type TextValue = UrlVars | ContentTypeVars | UserAgentVars;

/**
 * Let CEL type `type` stand where policies write a string: compared with one (`==`, `!=`, either
 * side), converted with `string()`, and given the string functions ngrok's examples call on it.
 * @example registerTextType(env, 'Url'); // req.url == 'https://a/b', req.url.contains('/admin')
 */
export function registerTextType(
  env: Environment,
  type: 'Url' | 'ContentType' | 'UserAgent',
): void {
  const text = (v: TextValue) => v.toString();
  env
    .registerOperator(`${type} == string`, (v: TextValue, s: string) => text(v) === s)
    .registerOperator(`${type} in list<string>`, (v: TextValue, l: string[]) => l.includes(text(v)))
    .registerOperator(`${type} + string`, (v: TextValue, s: string) => text(v) + s)
    .registerOperator(`string + ${type}`, (s: string, v: TextValue) => s + text(v))
    .registerFunction(`string(${type}): string`, text)
    .registerFunction(`${type}.size(): int`, (v: TextValue) => BigInt(text(v).length))
    .registerFunction(`${type}.contains(string): bool`, (v: TextValue, s: string) =>
      text(v).includes(s),
    )
    .registerFunction(`${type}.startsWith(string): bool`, (v: TextValue, s: string) =>
      text(v).startsWith(s),
    )
    .registerFunction(`${type}.endsWith(string): bool`, (v: TextValue, s: string) =>
      text(v).endsWith(s),
    )
    .registerFunction(`${type}.${RE2_MATCHES}(string): bool`, (v: TextValue, re: string) =>
      compileRegex(re).test(text(v)),
    );
}
