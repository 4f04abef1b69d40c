/**
 * Readings of an expression that skip CEL's evaluator for the shapes policies evaluate on every
 * request (cel.ts uses them when it compiles an expression): a string field read, a key looked up
 * in a map field. Each gives undefined wherever CEL might answer otherwise, and CEL then
 * evaluates.
 */
import type { ASTNode } from '@marcbachmann/cel-js';
import { CEL_TYPES } from './cel-types.js';
import { ReqVars, ResVars, type Activation } from './variables.js';

/**
 * Whether `value` is a node of the parsed tree.
 * @example isNode({ op: 'id', args: 'conn' }) // true
 */
export function isNode(value: unknown): value is ASTNode {
  return typeof value === 'object' && value !== null && 'op' in value && 'args' in value;
}

/** A chain of field reads from a variable: `conn.client_ip` is `conn` and `['client_ip']`. */
interface MemberPath {
  root: string;
  fields: readonly string[];
}

/** The expression `node` when it is a {@link MemberPath}, else undefined. */
function memberPath(node: unknown): MemberPath | undefined {
  const fields: string[] = [];
  while (isNode(node) && node.op === '.') {
    const [target, field] = node.args as [unknown, unknown];
    if (typeof field !== 'string') return undefined;
    fields.unshift(field);
    node = target;
  }
  if (fields.length === 0 || !isNode(node) || node.op !== 'id') return undefined;
  return typeof node.args === 'string' ? { root: node.args, fields } : undefined;
}

/** The classes of the CEL object types: CEL reads their fields as JavaScript properties. */
const OBJECT_CLASSES: ReadonlySet<unknown> = new Set(CEL_TYPES.map((t) => t.ctor));

/**
 * The value `path` names in `activation`, read as CEL reads it: each step an object of a CEL
 * type, its field a property. Undefined when the path meets anything else.
 */
function readPath(activation: Activation, path: MemberPath): unknown {
  let value: unknown = (activation as unknown as Record<string, unknown>)[path.root];
  for (const field of path.fields) {
    if (typeof value !== 'object' || value === null || !OBJECT_CLASSES.has(value.constructor)) {
      return undefined;
    }
    value = (value as Record<string, unknown>)[field];
  }
  return value;
}

/**
 * A reading of `ast` (of CEL type `type`) that skips CEL's evaluator, for the shapes policies
 * evaluate on every request and that cost several times more through it: a string field
 * (`conn.client_ip`, as `${conn.client_ip}` in a header value) and a key looked up in a map field
 * (`'x-block' in req.headers`, which CEL answers with the map's `get`; for a header, without
 * building the map). The reading gives undefined wherever CEL might answer otherwise (another
 * type, an error): CEL then evaluates.
 * @example directReader(ast, 'string')?.(activation) // '203.0.113.7' for conn.client_ip
 */
export function directReader(
  ast: unknown,
  type: string | undefined,
): ((activation: Activation) => string | boolean | undefined) | undefined {
  const path = type === 'string' ? memberPath(ast) : undefined;
  if (path) {
    return (activation) => {
      const value = readPath(activation, path);
      return typeof value === 'string' ? value : undefined;
    };
  }
  if (!isNode(ast) || ast.op !== 'in') return undefined;
  const [key, map] = ast.args as [unknown, unknown];
  const mapPath = memberPath(map);
  if (!mapPath || !isNode(key) || key.op !== 'value' || typeof key.args !== 'string') {
    return undefined;
  }
  const name = key.args;
  const owner =
    mapPath.fields.at(-1) === 'headers'
      ? { root: mapPath.root, fields: mapPath.fields.slice(0, -1) }
      : undefined;
  return (activation) => {
    if (owner) {
      // The header map's keys are the lower-case names its `get` also tries: a header is in it
      // exactly when `header` finds a value for it.
      const message = readPath(activation, owner);
      if (message instanceof ReqVars || message instanceof ResVars) {
        return message.header(name).length > 0;
      }
    }
    const value = readPath(activation, mapPath);
    return value instanceof Map ? value.get(name) !== undefined : undefined;
  };
}
