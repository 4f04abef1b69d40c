import { Parser, type CST } from 'yaml';

/**
 * Bounds on a traffic policy document, checked before anything recursive (the YAML composer, our
 * shape checks, CEL) sees it. A small text such as `[[[[…]]]]` would otherwise drive a recursive
 * parser into a stack overflow, which V8 does not always survive cleanly: a later regular
 * expression compiled near the stack limit can abort the whole process.
 *
 * Both checks are iterative. The text is measured on yaml's concrete syntax tree, whose lexer and
 * parser keep their own stacks instead of recursing, so JSON and YAML (flow and block nesting,
 * compact `- - -` sequences) are measured the same way.
 */
export const POLICY_DOCUMENT_LIMITS = {
  /** Bytes of UTF-8 in one document; hundreds of rules fit. */
  maxBytes: 128 * 1024,
  /** Nesting of mappings and lists; a policy needs about 6 (phase, rule, actions, config, …). */
  maxDepth: 32,
  /** Rules in one list (phase); each runs on every request or connection of its phase. */
  maxRulesPerList: 100,
} as const;

type Collection = CST.BlockMap | CST.BlockSequence | CST.FlowCollection;

function isCollection(token: CST.Token | undefined): token is Collection {
  return (
    token?.type === 'block-map' || token?.type === 'block-seq' || token?.type === 'flow-collection'
  );
}

/** The children of a collection that can nest further: keys (complex keys can) and values. */
function* nested(token: Collection): Generator<CST.Token> {
  for (const item of token.items) {
    if ('key' in item && item.key) yield item.key;
    if (item.value) yield item.value;
  }
}

/** The deepest nesting in `roots`, walking with an explicit stack; stops once past `limit`. */
export function deepest<T>(
  roots: T[],
  children: (node: T) => Iterable<T> | undefined,
  limit: number,
) {
  const stack: [T, number][] = roots.map((root) => [root, 0]);
  let max = 0;
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    const inner = children(node);
    if (!inner) continue;
    const level = depth + 1;
    if (level > max) max = level;
    if (max > limit) return max;
    for (const child of inner) stack.push([child, level]);
  }
  return max;
}

/**
 * Why the document text `text` is out of bounds, or undefined when it is within them.
 * @example policyTextProblem('['.repeat(1000) + ']'.repeat(1000)) // 'it nests more than 32 …'
 */
export function policyTextProblem(text: string): string | undefined {
  const { maxBytes, maxDepth } = POLICY_DOCUMENT_LIMITS;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    return `the traffic policy is ${bytes} bytes long; the limit is ${maxBytes} bytes`;
  }
  const roots: CST.Token[] = [];
  for (const token of new Parser().parse(text)) {
    if (token.type === 'document' && token.value) roots.push(token.value);
  }
  const depth = deepest(roots, (t) => (isCollection(t) ? nested(t) : undefined), maxDepth);
  return depth > maxDepth ? nestingProblem() : undefined;
}

/**
 * Why an already-parsed policy value (a structured `policy` object in a JSON body, or a bind's
 * legacy Policy) is out of bounds, or undefined.
 * @example policyValueProblem({ inbound: [] }) // undefined
 */
export function policyValueProblem(value: unknown): string | undefined {
  const children = (v: unknown): unknown[] | undefined =>
    typeof v === 'object' && v !== null ? Object.values(v) : undefined;
  return deepest([value], children, POLICY_DOCUMENT_LIMITS.maxDepth) >
    POLICY_DOCUMENT_LIMITS.maxDepth
    ? nestingProblem()
    : undefined;
}

function nestingProblem(): string {
  return `the traffic policy nests mappings and lists more than ${POLICY_DOCUMENT_LIMITS.maxDepth} levels deep; a policy needs far fewer`;
}
