import tseslint from 'typescript-eslint';

// The layer rules (who may import whom) are data in .dependency-cruiser.cjs, run by `npm run lint`.
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
);
