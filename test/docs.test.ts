import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { renderPages } from '../scripts/gen-docs.ts';

/**
 * The docs stay true to the tree: the generated reference pages match the code, the README links
 * every page under docs/, and every repository path that README.md, the other Markdown files and
 * the code comments name exists.
 *
 * What counts as a repository path (pathsIn):
 * - a token that starts with one of the repository's top-level entries, optionally after `./`:
 *   a folder followed by `/` (`api/app.ts`, `workers/gpu-host/`) or a root file (`package.json`);
 * - made of letters, digits, `_`, `-`, `.` and `/`, sentence dots at its end dropped;
 * - that ends in `/` (a folder) or in one of EXTENSIONS (a file); `db/schema`, `web/dist` or
 *   `test/outage.e2e` name no file and are not checked;
 * - with an optional `:LINE` or `:LINE-LINE` suffix, which must be a line of the file;
 * - that is not part of something larger: not preceded by a letter, digit, `_`, `-`, `.`, `/`,
 *   `~`, `$`, `@` or `:` (URLs, `../x`, `~/.gpuplane/x`, `$PWD/x`), and not followed by `*`, `<`,
 *   `{`, `[`, `$` or `…` (globs and placeholders such as `test/histories/<kind>-<shape>.json`).
 * In Markdown, a path that climbs with `../` (`../test/histories/README.md`) and a link's target,
 * unless a URL, must resolve relative to their page to a path inside the repository, and a link's
 * `#anchor` must name a heading of the page it points to.
 *
 * Files read: every tracked or new (not ignored) Markdown file, and the comments of every *.ts,
 * *.tsx, *.js, *.mjs, *.py and *.sh file, outside test/fixtures/.
 */
const EXTENSIONS = ['ts', 'tsx', 'js', 'mjs', 'json', 'jsonl', 'md', 'py', 'sh', 'sql', 'yaml', 'yml', 'toml', 'txt', 'html', 'css', 'png', 'proto'];
const SOURCE = /\.(tsx?|m?js|py|sh)$/;
const SKIPPED = /^(test\/fixtures\/|node_modules\/|.*\/?dist\/)/;

const root = process.cwd();
const repoFiles = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && !SKIPPED.test(f) && fs.existsSync(f));
const topLevel = [...new Set(repoFiles.map((f) => f.split('/')[0]))];
const topDirs = topLevel.filter((t) => repoFiles.some((f) => f.startsWith(`${t}/`)));
const topFiles = topLevel.filter((t) => !topDirs.includes(t));

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const PATH = new RegExp(
  `(?<![\\w\\-/~$@:.])(?:\\./)?((?:${topDirs.map(escape).join('|')})/[\\w.\\-/]*|(?:${topFiles.map(escape).join('|')})(?![\\w\\-/]|\\.\\w))(?::(\\d+)(?:-(\\d+))?)?`,
  'g',
);
/** A path relative to its page that climbs out of the page's folder: `../test/histories/README.md`. */
const UP_PATH = new RegExp(`(?<![\\w.\\-/~$@:])((?:\\.\\./)+[\\w.\\-/]*\\.(?:${EXTENSIONS.join('|')}))(?![\\w\\-/*<{[$…])`, 'g');
const PLACEHOLDER_AFTER = /^[*<{[$…]/;
const FILE_NAME = new RegExp(`\\.(${EXTENSIONS.join('|')})$`);

interface PathRef {
  path: string;
  /** The highest line the reference names, if any. */
  line?: number;
  /** 0-based offset of the reference in the text it was found in. */
  at: number;
}

/** pathsIn returns the repository paths that a piece of prose names, by the rule above. */
function pathsIn(text: string): PathRef[] {
  const refs: PathRef[] = [];
  for (const m of text.matchAll(PATH)) {
    if (PLACEHOLDER_AFTER.test(text.slice(m.index + m[0].length))) continue;
    const p = m[1].replace(/[.-]+$/, '');
    const isRootFile = topFiles.includes(p);
    if (!isRootFile && !p.endsWith('/') && !FILE_NAME.test(p)) continue;
    refs.push({ path: p, line: m[3] ? Number(m[3]) : m[2] ? Number(m[2]) : undefined, at: m.index });
  }
  return refs;
}

/** The comments of a TypeScript or JavaScript file, each with its offset. */
function tsComments(file: string, text: string): { text: string; at: number }[] {
  const kind = file.endsWith('.tsx') ? ts.ScriptKind.TSX : /\.m?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind);
  const seen = new Map<number, number>();
  const collect = (ranges: readonly ts.CommentRange[] | undefined) => ranges?.forEach((r) => seen.set(r.pos, r.end));
  const visit = (node: ts.Node) => {
    collect(ts.getLeadingCommentRanges(text, node.getFullStart()));
    collect(ts.getTrailingCommentRanges(text, node.getEnd()));
    ts.forEachChild(node, visit);
  };
  visit(source);
  collect(ts.getLeadingCommentRanges(text, source.endOfFileToken.getFullStart()));
  return [...seen].map(([pos, end]) => ({ text: text.slice(pos, end), at: pos }));
}

/** The comments of a Python file (`#` comments and triple-quoted strings) or a shell script (`#` comments). */
function hashComments(file: string, text: string): { text: string; at: number }[] {
  const out: { text: string; at: number }[] = [];
  const python = file.endsWith('.py');
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (python && (text.startsWith('"""', i) || text.startsWith("'''", i))) {
      const end = text.indexOf(text.slice(i, i + 3), i + 3);
      const stop = end < 0 ? text.length : end + 3;
      out.push({ text: text.slice(i, stop), at: i });
      i = stop;
    } else if (c === '"' || c === "'") {
      // A one-line string: skip it, escapes included (a shell's '…' has none, but a \' cannot end it there either).
      let j = i + 1;
      while (j < text.length && text[j] !== c && text[j] !== '\n') j += text[j] === '\\' ? 2 : 1;
      i = j + 1;
    } else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]))) {
      const end = text.indexOf('\n', i);
      const stop = end < 0 ? text.length : end;
      out.push({ text: text.slice(i, stop), at: i });
      i = stop;
    } else i += 1;
  }
  return out;
}

/** GitHub's anchors of a Markdown page's headings (code blocks left out). */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const counts = new Map<string, number>();
  for (const line of withoutCodeBlocks(markdown).split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const slug = h[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = counts.get(slug) ?? 0;
    counts.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

/** The text with fenced code blocks blanked out (their lines kept, so line numbers still hold). */
function withoutCodeBlocks(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```/gm, (block) => block.replace(/[^\n]/g, ' '));
}

const lineAt = (text: string, at: number) => text.slice(0, at).split('\n').length;
const linesOf = (file: string) => fs.readFileSync(file, 'utf8').split('\n').length;

/** What is wrong with one path reference, or null when it names something that exists. */
function problemOf(ref: PathRef): string | null {
  const full = path.join(root, ref.path);
  if (!fs.existsSync(full)) return 'does not exist';
  if (ref.path.endsWith('/') && !fs.statSync(full).isDirectory()) return 'is not a folder';
  if (ref.line !== undefined && fs.statSync(full).isFile() && ref.line > linesOf(full)) return `has ${linesOf(full)} lines`;
  return null;
}

const markdownFiles = repoFiles.filter((f) => f.endsWith('.md'));
const sourceFiles = repoFiles.filter((f) => SOURCE.test(f));

describe('docs', () => {
  it('docs/cli.md and docs/api.md are generated from the current code (npm run docs)', async () => {
    const stale = (await renderPages()).filter((p) => p.next !== p.current).map((p) => p.file);
    expect(stale, 'stale generated reference pages: run npm run docs').toEqual([]);
  });

  it('README.md is a front door of at most 400 lines that links every page under docs/', () => {
    const readme = fs.readFileSync('README.md', 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(401);
    const unlinked = markdownFiles.filter((f) => f.startsWith('docs/') && !readme.includes(`](${f})`));
    expect(unlinked, 'pages under docs/ that README.md does not link').toEqual([]);
  });

  it('the path rule takes files, folders and lines, and leaves URLs, globs and placeholders alone', () => {
    const text = 'see api/app.ts:3, ./db/ and README.md. Not db/schema, test/*.test.ts, workflows/<kind>.ts, ../x/api/a.ts, https://h/api/a.ts or ~/.x/api/b.ts';
    expect(pathsIn(text).map((r) => `${r.path}${r.line ? `:${r.line}` : ''}`)).toEqual(['api/app.ts:3', 'db/', 'README.md']);
  });

  it('every repository path named in Markdown and in code comments exists', () => {
    const stale: string[] = [];
    const check = (file: string, text: string, offset: number, whole: string) => {
      for (const ref of pathsIn(text)) {
        const problem = problemOf(ref);
        if (problem) stale.push(`${file}:${lineAt(whole, offset + ref.at)}: ${ref.path}${ref.line ? `:${ref.line}` : ''} ${problem}`);
      }
    };
    for (const file of markdownFiles) {
      const text = fs.readFileSync(file, 'utf8');
      check(file, text, 0, text);
      // `../x/y.md` is relative to the page; the repository's pages name nothing outside it.
      for (const m of text.matchAll(UP_PATH)) {
        const resolved = path.resolve(path.dirname(path.join(root, file)), m[1]);
        const where = `${file}:${lineAt(text, m.index)}: ${m[1]}`;
        if (path.relative(root, resolved).startsWith('..')) stale.push(`${where} leads outside the repository`);
        else if (!fs.existsSync(resolved)) stale.push(`${where} does not exist`);
      }
    }
    for (const file of sourceFiles) {
      const text = fs.readFileSync(file, 'utf8');
      if (pathsIn(text).length === 0) continue; // nothing that looks like a path, in comments or code
      const comments = /\.(py|sh)$/.test(file) ? hashComments(file, text) : tsComments(file, text);
      for (const c of comments) check(file, c.text, c.at, text);
    }
    expect(stale, `stale references (file:line: path):\n${stale.join('\n')}`).toEqual([]);
  });

  it('every Markdown link resolves inside the repository, to a heading where it names one', () => {
    const broken: string[] = [];
    for (const file of markdownFiles) {
      const text = withoutCodeBlocks(fs.readFileSync(file, 'utf8'));
      for (const m of text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        const target = m[1];
        if (/^[a-z][a-z+.-]*:/i.test(target)) continue; // a URL
        const [p, anchor] = target.split('#');
        const resolved = p ? path.resolve(path.dirname(path.join(root, file)), decodeURIComponent(p)) : path.join(root, file);
        const where = `${file}:${lineAt(text, m.index)}: ${target}`;
        if (path.relative(root, resolved).startsWith('..')) broken.push(`${where} leads outside the repository`);
        else if (!fs.existsSync(resolved)) broken.push(`${where} does not exist`);
        else if (anchor && resolved.endsWith('.md') && !anchorsOf(fs.readFileSync(resolved, 'utf8')).has(anchor)) broken.push(`${where} names no heading of ${path.relative(root, resolved)}`);
      }
    }
    expect(broken, `broken links (file:line: target):\n${broken.join('\n')}`).toEqual([]);
  });
});
