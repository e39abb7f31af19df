/**
 * The link the MLflow client prints at the end of a run ("View run … at: <tracking uri>/#/
 * experiments/<id>/runs/<run>"), opened in Debian's chromium: it lands on the run's page in the
 * console, signed in or after signing in, not on the cluster page; the experiment's link printed
 * beside it lands on the experiment's page.
 */
import { execFile } from 'node:child_process';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { consoleApp } from './support/console-app.ts';
import { examplesPython } from './support/examples.ts';

const web = consoleApp('webmlflowlink');

/** The real MLflow client (the examples' venv) against the test's API; resolves with what it printed. */
const mlflowPython = (code: string) =>
  new Promise<{ status: number; out: string }>((resolve) => {
    execFile(
      examplesPython(),
      ['-c', code],
      {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', MLFLOW_TRACKING_URI: `${web.url}/mlflow`, MLFLOW_TRACKING_TOKEN: web.admin, MLFLOW_HTTP_REQUEST_MAX_RETRIES: '0', PYTHONDONTWRITEBYTECODE: '1' },
        timeout: 90_000,
      },
      (err, stdout, stderr) => resolve({ status: err ? 1 : 0, out: `${stdout}\n${stderr}` }),
    );
  });

const runPage = async (page: Page, runId: string) => {
  await page.locator('h1').filter({ hasText: 'linked-run' }).waitFor({ timeout: 10_000 });
  expect(await page.locator('main').innerText()).toContain(runId);
  expect(await page.locator('[data-chart="loss"]').count()).toBe(1);
};

describe("MLflow's run link in the console", () => {
  it("opens the run page, signed in or after signing in, and the experiment's link the experiment's page", async () => {
    const code = `
import json, mlflow
mlflow.set_experiment("linkproj/linkexp")
with mlflow.start_run(run_name="linked-run") as run:
    mlflow.log_metric("loss", 0.5, step=1)
    mlflow.log_metric("loss", 0.25, step=2)
print(json.dumps({"run_id": run.info.run_id, "experiment_id": run.info.experiment_id}))`;
    const r = await mlflowPython(code);
    expect(r.status, r.out).toBe(0);
    const ids = JSON.parse(r.out.split('\n').find((l) => l.startsWith('{"run_id"'))!) as { run_id: string; experiment_id: string };
    // The link as the client printed it.
    const link = /View run linked-run at: (\S+)/.exec(r.out)?.[1];
    expect(link, r.out).toBe(`${web.url}/mlflow/#/experiments/${ids.experiment_id}/runs/${ids.run_id}`);

    // Not signed in yet: the sign-in form, then the run's page.
    const page = await web.browser.context.newPage();
    await page.goto(link!);
    await page.locator('form input').first().fill(web.admin);
    await page.locator('form button[type="submit"], form button').first().click();
    await runPage(page, ids.run_id);
    expect(page.url()).toBe(`${web.url}/#/experiments/${ids.experiment_id}/runs/${ids.run_id}`);

    // Signed in: straight to it, in a new tab as a terminal opens it.
    const again = await web.browser.context.newPage();
    await again.goto(link!);
    await runPage(again, ids.run_id);
    // The Experiments tab is the current one, and the page links to its experiment.
    expect(await again.locator('nav a.active').innerText()).toBe('Experiments');
    expect(await again.locator('main a[href^="#/experiments?"]').first().innerText()).toBe('linkproj/linkexp');

    // The experiment's link, printed beside it: the experiment's page (its MLflow id is looked up), not the list of all.
    const expLink = /View experiment at: (\S+)/.exec(r.out)?.[1];
    expect(expLink, r.out).toBe(`${web.url}/mlflow/#/experiments/${ids.experiment_id}`);
    await again.goto(expLink!);
    await again.locator('h1').filter({ hasText: 'linkproj / linkexp' }).waitFor({ timeout: 10_000 });
    expect(again.url()).toBe(`${web.url}/#/experiments?project=linkproj&experiment=linkexp`);
    await again.locator('[data-chart="loss"][data-lines="1"]').waitFor({ timeout: 10_000 });
    // An id MLflow does not know: said so, on the page.
    await again.goto(`${web.url}/mlflow/#/experiments/no-such-experiment`);
    await again.locator('main p.error').filter({ hasText: 'No experiment no-such-experiment' }).waitFor({ timeout: 10_000 });
  });
});
