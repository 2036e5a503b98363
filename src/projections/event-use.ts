import { parse, type Node } from 'acorn';

// What a query can observe of the event objects its handlers receive, found from its source
// before it runs. Building each event object was most of a handler call: freezing it (the
// reference makes its fields read-only) and materialising bodyRaw took ~1.1 µs of ~2.2 µs per
// event (measured over 500k events). A query that only ever reads fields by name (`e.body.v`,
// `e['streamId']`) can neither write to the object nor see a field it does not name, so its
// events need neither, and fields it never reads need not cross into the sandbox at all.
//
// Conservative: when a name that may hold an event is used in any other way (passed to a
// function, stored, returned, compared, written through, read with a computed key, a method
// called on it), or the query uses `arguments` or `with`, the query "escapes" and gets full
// event objects. The sandbox also checks at start that every handler and the partitionBy
// function are functions this analysis saw (their source text), so a built-in or bound
// function used as a handler gets full event objects too.

export interface EventUse {
  /** Some event object may be written to or seen whole: freeze it and fill every field. */
  escapes: boolean;
  /** Fields read by name from event objects (meaningful only when nothing escapes). */
  reads: string[];
  /** Source text of every function in the query: the handlers must be among them. */
  functions: string[];
  /** Source text of the functions written inline as partitionBy's argument. */
  partitionFunctions: string[];
}

type AnyNode = Node & Record<string, unknown>;
interface Place { parent: AnyNode | undefined; key: string | undefined }

const FUNCTION_TYPES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

export function analyseEventUse(source: string): EventUse {
  const escaping: EventUse = { escapes: true, reads: [], functions: [], partitionFunctions: [] };
  let program: AnyNode;
  try {
    program = parse(source, { ecmaVersion: 'latest', sourceType: 'script' }) as unknown as AnyNode;
  } catch {
    return escaping;
  }
  const places = new Map<AnyNode, Place>();
  const nodes: AnyNode[] = [];
  walk(program, { parent: undefined, key: undefined }, (node, place) => {
    places.set(node, place);
    nodes.push(node);
  });
  const functions: string[] = [];
  const partitionFunctions: string[] = [];
  const names = new Set<string>();
  for (const node of nodes) {
    if (node.type === 'WithStatement') return escaping;
    if (!FUNCTION_TYPES.has(node.type)) continue;
    const text = source.slice(node.start, node.end);
    functions.push(text);
    const { parent, key } = places.get(node)!;
    const partitionFn = parent !== undefined && key === 'arguments' && isPartitionByCall(parent);
    if (partitionFn) partitionFunctions.push(text);
    // Events arrive as the second argument of handlers and the first of partitionBy's
    // function; bind can only shift arguments right, so every later parameter counts too.
    const params = node.params as AnyNode[];
    for (let i = 0; i < params.length; i++) {
      if (i === 0 && !partitionFn && params[i].type !== 'RestElement') continue;
      if (params[i].type !== 'Identifier') return escaping;
      names.add(params[i].name as string);
    }
  }
  const reads = new Set<string>();
  for (const node of nodes) {
    if (node.type !== 'Identifier') continue;
    const place = places.get(node)!;
    if (!isReference(place)) continue;
    if (node.name === 'arguments') return escaping;
    if (!names.has(node.name as string)) continue;
    const field = fieldRead(place, places);
    if (field === undefined) return escaping;
    reads.add(field);
  }
  return { escapes: false, reads: [...reads], functions, partitionFunctions };
}

function isPartitionByCall(node: AnyNode): boolean {
  if (node.type !== 'CallExpression') return false;
  const callee = node.callee as AnyNode;
  if (callee.type === 'Identifier') return callee.name === 'partitionBy';
  return callee.type === 'MemberExpression' && !callee.computed && (callee.property as AnyNode).name === 'partitionBy';
}

/** The field read when a reference is the object of a plain member read; undefined for any other use. */
function fieldRead({ parent, key }: Place, places: Map<AnyNode, Place>): string | undefined {
  if (parent?.type !== 'MemberExpression' || key !== 'object') return undefined;
  const property = parent.property as AnyNode;
  let field: string | undefined;
  if (!parent.computed) field = property.name as string;
  else if (property.type === 'Literal' && (typeof property.value === 'string' || typeof property.value === 'number')) field = String(property.value);
  if (field === undefined || isWriteTarget(parent, places) || isCallee(parent, places)) return undefined;
  return field;
}

/** The member expression is written to: assigned, updated, deleted, destructured into, a for-in/of target. */
function isWriteTarget(member: AnyNode, places: Map<AnyNode, Place>): boolean {
  for (let node = member; ;) {
    const { parent, key } = places.get(node)!;
    switch (parent?.type) {
      case undefined: return false;
      case 'AssignmentExpression': return key === 'left';
      case 'UpdateExpression': return true;
      case 'UnaryExpression': return parent.operator === 'delete';
      case 'ForInStatement': case 'ForOfStatement': return key === 'left';
      case 'ChainExpression': case 'ParenthesizedExpression': node = parent; continue;
      case 'ArrayPattern': case 'ObjectPattern': case 'RestElement': return true;
      case 'AssignmentPattern': return key === 'left';
      case 'Property': return key === 'value' && places.get(parent)!.parent?.type === 'ObjectPattern';
      default: return false;
    }
  }
}

/** `e.method()`: the object would become `this` of the call. */
function isCallee(member: AnyNode, places: Map<AnyNode, Place>): boolean {
  for (let node = member; ;) {
    const { parent, key } = places.get(node)!;
    if (parent?.type === 'ChainExpression' || parent?.type === 'ParenthesizedExpression') {
      node = parent;
      continue;
    }
    return ((parent?.type === 'CallExpression' || parent?.type === 'NewExpression') && key === 'callee')
      || (parent?.type === 'TaggedTemplateExpression' && key === 'tag');
  }
}

/** Whether an Identifier in this place refers to a variable (not a property name, label or declaration). */
function isReference({ parent, key }: Place): boolean {
  switch (parent?.type) {
    case undefined: return true;
    case 'MemberExpression': return key === 'object' || parent.computed === true;
    case 'Property': case 'MethodDefinition': case 'PropertyDefinition': return key === 'value' || parent.computed === true;
    case 'LabeledStatement': case 'BreakStatement': case 'ContinueStatement': case 'MetaProperty': return false;
    case 'FunctionDeclaration': case 'FunctionExpression': case 'ArrowFunctionExpression': return key === 'body';
    case 'ClassDeclaration': case 'ClassExpression': case 'VariableDeclarator': return key !== 'id';
    case 'CatchClause': return key !== 'param';
    default: return true;
  }
}

function walk(node: AnyNode, place: Place, visit: (node: AnyNode, place: Place) => void): void {
  visit(node, place);
  for (const key of Object.keys(node)) {
    if (key === 'type' || key === 'start' || key === 'end' || key === 'loc' || key === 'range') continue;
    const value = node[key];
    if (Array.isArray(value)) {
      for (const item of value) if (isNode(item)) walk(item, { parent: node, key }, visit);
    } else if (isNode(value)) walk(value, { parent: node, key }, visit);
  }
}

function isNode(value: unknown): value is AnyNode {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}
