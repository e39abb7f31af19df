import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Files start real processes against one Temporal server and one PostgreSQL cluster; each
    // file has its own databases and task queues, so several run at a time: most of an end-to-end
    // file's time is waiting on heartbeats and timeouts (lost-retry.e2e keeps 2 cores 24 % busy).
    // Three workers on 2 cores: vitest took 1281-1331 s on a clean clone with 2 cores 91 % busy
    // (vmstat; 2026-12-08, the in-process APIs on PostgreSQL), against 35 min with two workers
    // before the processes ran from .dist (runtime/dist.mjs).
    fileParallelism: true,
    maxWorkers: 3,
    testTimeout: 120_000,
    hookTimeout: 120_000,
    reporters: ['default'],
    // Every response the API sends in a test is checked against the OpenAPI document
    // (api/response-check.ts); the API processes end-to-end tests start inherit it.
    // Jobs run as the agent's user in the suite (its fixtures live in folders only root reads);
    // test/tenancy.e2e.test.ts runs them as job users, the default for an agent running as root.
    // No agent looks for podman (and labels its node runtime=podman, which tests of a node's
    // labels would see) but container-image.e2e's, which names it.
    env: { GPUPLANE_CHECK_RESPONSES: '1', GPUPLANE_JOB_USERS: 'agent', GPUPLANE_PODMAN: 'off' },
  },
});
