import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Files start real processes against one Temporal server; on 2 cores they run one at a time.
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    // Every response the API sends in a test is checked against the OpenAPI document
    // (api/response-check.ts); the API processes end-to-end tests start inherit it.
    // Jobs run as the agent's user in the suite (its fixtures live in folders only root reads);
    // test/tenancy.e2e.test.ts runs them as job users, the default for an agent running as root.
    env: { GPUPLANE_CHECK_RESPONSES: '1', GPUPLANE_JOB_USERS: 'agent' },
  },
});
