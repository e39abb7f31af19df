import tseslint from 'typescript-eslint';

// The layer rules (who may import whom) are data in .dependency-cruiser.cjs, run by `npm run lint`.
export default tseslint.config(
  // .dist: scripts/build-dist.mjs's output (esbuild bundles of the sources linted here).
  { ignores: ['node_modules/', 'db/migrations/', 'dist/', 'web/dist/', '.dist/', '.dist-build-*/'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // A source file says one thing (docs/extending.md): past 300 lines, split it. Tests are left out:
  // one file a behaviour, however many cases it takes.
  {
    files: ['**/*.ts', '**/*.tsx', '**/*.mjs', '**/*.cjs'],
    ignores: ['test/**'],
    rules: { 'max-lines': ['error', { max: 300 }] },
  },
);
