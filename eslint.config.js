import tseslint from 'typescript-eslint';

const nodeBuiltins = ['assert', 'buffer', 'child_process', 'crypto', 'dns', 'events', 'fs', 'fs/promises', 'http', 'https', 'net', 'os', 'path', 'process', 'stream', 'timers', 'url', 'util', 'worker_threads', 'zlib'];

export default tseslint.config(
  { ignores: ['node_modules/', 'db/migrations/', 'dist/'] },
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
          paths: nodeBuiltins.flatMap((m) => [
            { name: m, message: 'workflows are deterministic sandboxes: no Node built-ins' },
            { name: `node:${m}`, message: 'workflows are deterministic sandboxes: no Node built-ins' },
          ]),
          patterns: [
            { group: ['../db/*', '../api/*', '../workers/*', '../cli/*', '../temporal/*'], message: 'workflows must not import runtime code' },
            { group: ['@temporalio/client', '@temporalio/worker', '@temporalio/activity'], message: 'workflows import only @temporalio/workflow and @temporalio/common' },
            { group: ['../activities/*'], message: 'workflows take only types from activities (import type)', allowTypeImports: true },
          ],
        },
      ],
    },
  },
);
