/**
 * Regenerates the CLI and API reference sections of README.md from the code itself:
 * commander's help for every gpuctl command, and the OpenAPI document's routes.
 *
 *   npm run docs          rewrite README.md
 *   npm run docs -- --check   exit 1 if README.md is stale
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

export function replaceSection(text: string, name: string, body: string): string {
  const begin = `<!-- BEGIN generated:${name} -->`;
  const end = `<!-- END generated:${name} -->`;
  const i = text.indexOf(begin);
  const j = text.indexOf(end);
  if (i < 0 || j < i) throw new Error(`README.md lacks the ${name} markers`);
  return `${text.slice(0, i + begin.length)}\n${body}\n${text.slice(j)}`;
}

export async function renderReadme(current: string): Promise<string> {
  return replaceSection(replaceSection(current, 'cli', cliReference()), 'api', await apiReference());
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  const current = fs.readFileSync('README.md', 'utf8');
  const next = await renderReadme(current);
  if (process.argv.includes('--check')) {
    if (next !== current) {
      console.error('README.md reference sections are stale: run npm run docs');
      process.exit(1);
    }
  } else {
    fs.writeFileSync('README.md', next);
  }
}
