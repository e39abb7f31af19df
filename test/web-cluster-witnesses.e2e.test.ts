/**
 * The cluster page shows each node's peer witnesses (issue 46) as `gpuctl nodes` does under
 * WITNESSES: who last heard the node and when, by their latest reports, and the control plane's
 * verdict when it is suspect or dead. The rows are written as the plane writes them (the peer
 * report route and the verdict loop), into the API's own database.
 */
import { describe, expect, it } from 'vitest';
import { nodes, peerReports } from '../db/schema.ts';
import { consoleApp } from './support/console-app.ts';

const web = consoleApp('webwitnesses');

describe("the cluster page's witnesses", () => {
  it("lists each node's witnesses with when each last heard it, and a dead node's verdict with its reason", async () => {
    const db = web.app.database.db;
    const now = Date.now();
    const ago = (s: number) => new Date(now - s * 1000);
    await db.insert(nodes).values(
      ['w-1', 'w-2', 'w-3'].map((id) => ({ id, hostname: `${id}.lab`, labels: { node: id }, status: 'ONLINE' as const, peerAddr: `10.0.0.${id.at(-1)}:7100`, reportedAt: ago(1), peerVerdict: 'fine' as const, peerVerdictAt: ago(300) })),
    );
    // w-4 has been silent for 40 s: declared dead by two of its witnesses.
    const reason = 'silent for 6.1 s; 2 of 2 witnesses have not heard it for 5 s';
    await db.insert(nodes).values({ id: 'w-4', hostname: 'w-4.lab', labels: { node: 'w-4' }, status: 'ONLINE', peerAddr: '10.0.0.4:7100', reportedAt: ago(40), peerVerdict: 'dead', peerVerdictReason: reason, peerVerdictAt: ago(34) });
    await db.insert(peerReports).values([
      { witnessId: 'w-2', subjectId: 'w-1', lastHeardAt: ago(1), receivedAt: ago(0) },
      { witnessId: 'w-3', subjectId: 'w-1', lastHeardAt: ago(2), receivedAt: ago(0) },
      { witnessId: 'w-1', subjectId: 'w-4', lastHeardAt: ago(40), receivedAt: ago(0) },
      { witnessId: 'w-2', subjectId: 'w-4', lastHeardAt: ago(41), receivedAt: ago(1) },
      // A report older than a minute is no longer shown (api/serialize.ts), as in gpuctl nodes.
      { witnessId: 'w-3', subjectId: 'w-4', lastHeardAt: ago(200), receivedAt: ago(120) },
    ]);

    const page = web.page;
    await page.goto(`${web.url}/?token=${encodeURIComponent(web.admin)}#/cluster`);
    const card = (id: string) => page.locator(`[data-node="${id}"]`);
    await card('w-4').locator('[data-verdict]').waitFor({ timeout: 15_000 });

    expect(await card('w-1').locator('[data-witness]').evaluateAll((els) => els.map((e) => e.getAttribute('data-witness')))).toEqual(['w-2', 'w-3']);
    expect(await card('w-1').locator('[data-witness="w-2"]').innerText()).toMatch(/^w-2 heard it \d+s ago$/);
    expect(await card('w-1').locator('[data-witness="w-3"]').innerText()).toMatch(/^, w-3 heard it \d+s ago$/);
    expect(await card('w-1').locator('[data-peer]').getAttribute('data-peer')).toBe('fine');
    expect(await card('w-1').locator('[data-verdict]').count()).toBe(0);

    expect(await card('w-4').locator('[data-peer]').getAttribute('data-peer')).toBe('dead');
    expect(await card('w-4').locator('[data-verdict]').innerText()).toMatch(new RegExp(`^dead ${reason.replace(/[.;]/g, '\\$&')} \\(since \\d+s ago\\)$`));
    expect(await card('w-4').locator('[data-witness]').evaluateAll((els) => els.map((e) => e.getAttribute('data-witness')))).toEqual(['w-1', 'w-2']);
    expect(await card('w-4').locator('[data-witness="w-1"]').innerText()).toMatch(/^w-1 heard it \d+s ago$/);
    // Who reported when is in the title.
    expect(await card('w-4').locator('[data-witness="w-2"]').getAttribute('title')).toMatch(/^w-2's report arrived /);

    // A node with no reporting witness says so.
    expect(await card('w-2').locator('.witnesses').innerText()).toBe('Witnesses: none reporting');
  });
});
