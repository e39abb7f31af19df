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
    env: { GPUPLANE_CHECK_RESPONSES: '1' },
  },
});
