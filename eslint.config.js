import { builtinModules } from 'node:module';
import tseslint from 'typescript-eslint';

/** Every Node built-in, bare and with its node: prefix. */
const nodeBuiltins = [...new Set(builtinModules.map((m) => m.replace(/^node:/, '')))];
const builtinPaths = (message) => nodeBuiltins.flatMap((m) => [{ name: m, message }, { name: `node:${m}`, message }]);
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** A package import that is not a Node built-in (those have their own message). */
const packageImport = `^(?!\\.|node:|(?:${nodeBuiltins.map(escape).join('|')})(?:/|$))`;
/** The layers db/ must not reach (relative imports from any depth): orchestration, processes, tools. */
const layers = ['workflows', 'activities', 'api', 'cli', 'workers', 'temporal', 'scripts', 'bench', 'test'];
const layerImport = `^(?:\\.\\./)+(?:${layers.join('|')})(?:/|$)|^(?:\\.\\./)+config\\.ts$`;

export default tseslint.config(
  { ignores: ['node_modules/', 'db/migrations/', 'dist/', 'web/dist/'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Workflows are pure: only @temporalio/workflow (and common), shared types, and types of activities.
    files: ['workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: builtinPaths('workflows are deterministic sandboxes: no Node built-ins'),
          patterns: [
            { group: ['../db/*', '../api/*', '../workers/*', '../cli/*', '../temporal/*'], message: 'workflows must not import runtime code' },
            { group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'], message: 'workflows import only @temporalio/workflow and @temporalio/common' },
            { group: ['../activities/*'], message: 'workflows take only types from activities (import type)', allowTypeImports: true },
          ],
        },
      ],
    },
  },
  {
    // domain/ is the concepts as code, with no I/O: every layer imports it, it imports none of them.
    files: ['domain/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: builtinPaths('domain/ does no I/O: no Node built-ins'),
          patterns: [
            { regex: '^\\.\\./', message: 'domain/ imports none of the other layers (db, workflows, activities, api, cli, workers, temporal, config): only ./ siblings' },
            { regex: packageImport, message: 'domain/ is plain TypeScript: no packages (drizzle, Temporal, Fastify, pg...)' },
          ],
        },
      ],
    },
  },
  {
    // db/ knows the domain, drizzle and its drivers; never the orchestration or the processes.
    files: ['db/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: layerImport, message: 'db/ imports only domain/ (and drizzle, pg, PGlite): types it shares with workflows belong in domain/' },
          ],
        },
      ],
    },
  },
);
