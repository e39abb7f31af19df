import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newToken } from '../runtime/tokens.ts';
import { startTestApp, type TestApp } from './support/test-app.ts';

/** A project's stall-after through the API, and who may send a node's telemetry report. */
describe('stall-after per project, and the telemetry route', () => {
  let t: TestApp;
  const admin = newToken();
  const as = (token: string) => ({ authorization: `Bearer ${token}` });
  let member: string;
  let viewer: string;
  let nodeA: string;
  beforeAll(async () => {
    t = await startTestApp('stall-after', { temporal: false, auth: { adminTokens: [admin] }, stallAfterS: 1800 });
    const make = async (body: Record<string, unknown>) => (await t.app.inject({ method: 'POST', url: '/api/v1/tokens', headers: as(admin), payload: body })).json<{ token: string }>().token;
    member = await make({ name: 'm', role: 'member', projects: ['vision'] });
    viewer = await make({ name: 'v', role: 'viewer', projects: ['vision'] });
    nodeA = await make({ name: 'node a', role: 'node', node_id: 'node-a' });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("reads the plane's default, takes a project's own, and clears it; a viewer may read but not set", async () => {
    const get = await t.app.inject({ method: 'GET', url: '/api/v1/projects/vision/stall-after', headers: as(viewer) });
    expect(get.json()).toEqual({ project: 'vision', stall_after_s: 1800, level: 'default' });
    const put = await t.app.inject({ method: 'PUT', url: '/api/v1/projects/vision/stall-after', headers: as(member), payload: { stall_after_s: 600 } });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toEqual({ project: 'vision', stall_after_s: 600, level: 'project' });
    expect((await t.app.inject({ method: 'PUT', url: '/api/v1/projects/vision/stall-after', headers: as(viewer), payload: { stall_after_s: 60 } })).statusCode).toBe(403);
    const bad = await t.app.inject({ method: 'PUT', url: '/api/v1/projects/vision/stall-after', headers: as(member), payload: { stall_after_s: -5 } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toContain('stall_after_s');
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/projects/vision/stall-after', headers: as(member) })).json().stall_after_s).toBe(600);
    const del = await t.app.inject({ method: 'DELETE', url: '/api/v1/projects/vision/stall-after', headers: as(member) });
    expect(del.json()).toEqual({ project: 'vision', stall_after_s: 1800, level: 'default' });
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/projects/other/stall-after', headers: as(member) })).statusCode).toBe(403);
  });

  it("takes a node's report from that node's token or an admin's only, and refuses a malformed one", async () => {
    const report = { at: Date.now(), interval_s: 10, cards: [{ index: 0, utilization: 42, memory_used_mb: 100, memory_total_mb: 1000, power_w: null, temperature_c: 40 }], attempts: [] };
    const post = (node: string, token: string, payload: unknown) => t.app.inject({ method: 'POST', url: `/api/v1/nodes/${node}/telemetry`, headers: as(token), payload: payload as Record<string, unknown> });
    expect((await post('node-a', nodeA, report)).json()).toEqual({ attempts: 0, stalled: [] });
    expect((await post('node-a', admin, report)).statusCode).toBe(200);
    const other = await post('node-b', nodeA, report);
    expect(other.statusCode).toBe(403);
    expect(other.json().message).toContain('may only report for node node-a');
    expect((await post('node-a', member, report)).statusCode).toBe(403);
    const bad = await post('node-a', nodeA, { ...report, cards: [{ ...report.cards[0], utilization: 140 }] });
    expect(bad.statusCode).toBe(400);
    // An attempt the node does not run is ignored, not written to.
    expect((await post('node-a', nodeA, { ...report, attempts: [{ job_id: 'job-nope', attempt: 1, rank: 0, gpu_indices: [0], elapsed_s: 5, cpu_percent: 0, rss_bytes: 0, log_bytes: 0 }] })).json()).toEqual({ attempts: 0, stalled: [] });
    const scrape = await t.app.inject({ method: 'GET', url: '/metrics', headers: as(admin) });
    expect(scrape.body).toMatch(/^gpuplane_gpu_utilization_ratio\{node="node-a",card="0"\} 0\.42$/m);
    expect(scrape.body).toMatch(/^gpuplane_gpu_memory_used_bytes\{node="node-a",card="0"\} 104857600$/m);
  });
});
