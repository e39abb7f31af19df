/**
 * Regenerates the reference pages from the code itself: docs/cli.md from commander's help for
 * every gpuctl command, docs/api.md from the OpenAPI document's routes. Only the text between a
 * page's `<!-- BEGIN generated:NAME -->` and `<!-- END generated:NAME -->` markers is rewritten.
 *
 *   npm run docs              rewrite docs/cli.md and docs/api.md
 *   npm run docs -- --check   exit 1, naming the stale pages, if either is out of date
 */
import fs from 'node:fs';
import type { Command } from 'commander';
import { buildApp } from '../api/app.ts';
import type { ApiDeps } from '../api/deps.ts';
import { buildProgram } from '../cli/main.ts';

export function cliReference(): string {
  const program = buildProgram();
  const block = (c: Command, name: string) => `### \`${name}\`\n\n\`\`\`text\n${c.helpInformation().trim()}\n\`\`\``;
  return [block(program, 'gpuctl'), ...program.commands.map((c) => block(c, `gpuctl ${c.name()}`))].join('\n\n');
}

export async function apiReference(): Promise<string> {
  // Only the routes are read; no request is served, so no database or Temporal is needed.
  const app = await buildApp({} as ApiDeps);
  await app.ready();
  const doc = app.swagger() as { paths: Record<string, Record<string, { summary?: string; tags?: string[] }>> };
  await app.close();
  const rows = Object.entries(doc.paths).flatMap(([p, ops]) => Object.entries(ops).map(([m, op]) => `| \`${m.toUpperCase()}\` | \`${p}\` | ${op.summary ?? ''} |`));
  return ['| method | path | what |', '|---|---|---|', ...rows].join('\n');
}

/** The generated pages: each file, the name of its markers, and what goes between them. */
export const GENERATED_PAGES = [
  { file: 'docs/cli.md', name: 'cli', render: async () => cliReference() },
  { file: 'docs/api.md', name: 'api', render: apiReference },
] as const;

export function replaceSection(text: string, name: string, body: string, file = 'the page'): string {
  const begin = `<!-- BEGIN generated:${name} -->`;
  const end = `<!-- END generated:${name} -->`;
  const i = text.indexOf(begin);
  const j = text.indexOf(end);
  if (i < 0 || j < i) throw new Error(`${file} lacks the generated:${name} markers`);
  return `${text.slice(0, i + begin.length)}\n${body}\n${text.slice(j)}`;
}

/** Each generated page as it is on disk and as the current code renders it. */
export async function renderPages(root = '.'): Promise<{ file: string; current: string; next: string }[]> {
  const pages = [];
  for (const p of GENERATED_PAGES) {
    const current = fs.readFileSync(`${root}/${p.file}`, 'utf8');
    pages.push({ file: p.file, current, next: replaceSection(current, p.name, await p.render(), p.file) });
  }
  return pages;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const pages = await renderPages();
  if (process.argv.includes('--check')) {
    const stale = pages.filter((p) => p.next !== p.current).map((p) => p.file);
    if (stale.length > 0) {
      console.error(`stale generated reference: ${stale.join(', ')}; run npm run docs`);
      process.exit(1);
    }
  } else {
    for (const p of pages) if (p.next !== p.current) fs.writeFileSync(p.file, p.next);
  }
}
