import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join, posix, relative, sep } from 'node:path';
import ts from 'typescript';

// Faces (issue 30): each folder of src/ that others import from has an index.ts naming what it
// offers, and a file outside the folder imports that index, never a file inside it. A nested
// folder with an index.ts of its own (api/grpc) is a face too; one without (projections/language)
// is a part of its parent, reached from the parent's files only. No file imports the face of a
// folder it sits in: that import is a cycle through the index. Tests may import inner files to
// test internals; src/ may not. This reads every import of src/ (static, `export … from`, dynamic,
// and `import('…')` in types) with TypeScript's parser, so the rule stays true as files are added.

/** Imports of an inner file from outside its folder, each with the reason it must stay. None today. */
const ALLOWED: readonly { from: string; to: string; why: string }[] = [];

const SRC = fileURLToPath(new URL('../src/', import.meta.url));
let tree: Map<string, string> | undefined;
/** src/ as it is, read once for the tests below. */
const srcTree = () => (tree ??= sourceTree(SRC));

interface Import { from: string; to: string }

function sourceTree(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (/\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) {
        files.set(relative(root, path).split(sep).join('/'), readFileSync(path, 'utf8'));
      }
    }
  };
  walk(root);
  return files;
}

function relativeSpecifiers(name: string, text: string): string[] {
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      found.push(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true));
  return found.filter((s) => s.startsWith('.'));
}

/** Every import between files of the tree (paths relative to its root; `x.js` names x.ts when there is one). */
function importsOf(files: ReadonlyMap<string, string>): Import[] {
  const imports: Import[] = [];
  for (const [from, text] of files) {
    for (const specifier of relativeSpecifiers(from, text)) {
      const target = posix.join(posix.dirname(from), specifier);
      const to = files.has(target.replace(/\.js$/, '.ts')) ? target.replace(/\.js$/, '.ts') : target;
      if (files.has(to)) imports.push({ from, to });
    }
  }
  return imports;
}

/** The folders holding a file, outermost first (`a/b/c.ts`: `a`, `a/b`). */
function foldersOf(path: string): string[] {
  const parts = path.split('/').slice(0, -1);
  return parts.map((_, i) => parts.slice(0, i + 1).join('/'));
}

function isInside(path: string, folder: string): boolean {
  return path.startsWith(`${folder}/`);
}

/** What breaks the rule, one line per import. */
function faceRuleBreaks(files: ReadonlyMap<string, string>, allowed = ALLOWED): string[] {
  const breaks: string[] = [];
  for (const { from, to } of importsOf(files)) {
    if (allowed.some((a) => a.from === from && a.to === to)) continue;
    const ownFace = foldersOf(from).map((f) => `${f}/index.ts`).find((face) => face === to && face !== from);
    if (ownFace) {
      breaks.push(`${from} imports ${to}, the face of its own folder: import the module itself (a cycle through the index)`);
      continue;
    }
    // The outermost folder holding the target but not the importer: the face to pass.
    const folder = foldersOf(to).find((f) => !isInside(from, f));
    if (!folder) continue;
    const isFace = !folder.includes('/') || files.has(`${folder}/index.ts`);
    const face = `${folder}/index.ts`;
    if (isFace && to !== face) breaks.push(`${from} imports ${to}: go through ${face}`);
  }
  return breaks;
}

describe('faces: imports from outside a folder go through its index.ts', () => {
  it('holds for every file of src/', () => {
    expect(faceRuleBreaks(srcTree())).toEqual([]);
  });

  it('reads the imports it judges: src/ crosses folders through faces, node.ts to the store among them', () => {
    const crossing = importsOf(srcTree()).filter(({ from, to }) => {
      const folder = foldersOf(to)[0];
      return folder !== undefined && !isInside(from, folder);
    });
    expect(crossing.length).toBeGreaterThan(100);
    expect(crossing).toContainEqual({ from: 'node.ts', to: 'store/index.ts' });
    expect(crossing).toContainEqual({ from: 'api/grpc/streams.ts', to: 'verbs/index.ts' });
  });

  it('every allowed exception is still needed (a stale one is taken out)', () => {
    const imports = importsOf(srcTree());
    const stale = ALLOWED.filter((a) => !imports.some((i) => i.from === a.from && i.to === a.to));
    expect(stale).toEqual([]);
  });

  it('flags an inner file, a part of a nested face, a folder without a face, and a face imported from inside', () => {
    const tree = new Map(Object.entries({
      'main.ts': "import { x } from './a/x.js';\nimport { y } from './a/index.js';",
      'a/index.ts': "export { x } from './x.js';",
      'a/x.ts': "import { y } from './part/y.js';\nexport const x = y;",
      'a/own.ts': "import { x } from './index.js';",
      'a/part/y.ts': "import { x } from '../index.js';\nexport const y = 1;",
      'b/use.ts': [
        "import type { T } from '../c/t.js';",
        "export { y } from '../a/part/y.js';",
        "type U = import('../a/x.js').U;",
        "const late = () => import('../a/x.js');",
        "import { z } from '../d/index.js';",
      ].join('\n'),
      'c/t.ts': 'export type T = 1;',
      'd/index.ts': "export { s as z } from './sub/index.js';",
      'd/sub/index.ts': "export { s } from './s.js';",
      'd/sub/s.ts': 'export const s = 1;',
      'd/e.ts': "import { s } from './sub/s.js';",
    }));
    expect(faceRuleBreaks(tree, [])).toEqual([
      'main.ts imports a/x.ts: go through a/index.ts',
      'a/own.ts imports a/index.ts, the face of its own folder: import the module itself (a cycle through the index)',
      'a/part/y.ts imports a/index.ts, the face of its own folder: import the module itself (a cycle through the index)',
      'b/use.ts imports c/t.ts: go through c/index.ts',
      'b/use.ts imports a/part/y.ts: go through a/index.ts',
      'b/use.ts imports a/x.ts: go through a/index.ts',
      'b/use.ts imports a/x.ts: go through a/index.ts',
      'd/e.ts imports d/sub/s.ts: go through d/sub/index.ts',
    ]);
    expect(faceRuleBreaks(tree, [{ from: 'd/e.ts', to: 'd/sub/s.ts', why: 'an example' }])).not.toContain(
      'd/e.ts imports d/sub/s.ts: go through d/sub/index.ts');
  });
});
