import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { artifactRoot, IMAGE_MAX_BYTES, previewOf, TEXT_MAX_BYTES } from '../web/src/artifacts.ts';
import { whoLabel } from '../web/src/format.ts';
import { logRanks, rankTabs } from '../web/src/log-ranks.ts';
import { commandField, editedCommand } from '../web/src/retry-command.ts';

describe('the console header', () => {
  it("names the token once: gpuctl up's admin token reads admin, its home in the tooltip", () => {
    expect(whoLabel('admin (first start, /root/.gpuplane)', 'admin')).toEqual({ label: 'admin', detail: 'first start, /root/.gpuplane' });
    expect(whoLabel('web-member', 'member')).toEqual({ label: 'web-member · member', detail: null });
    expect(whoLabel('ci (nightly)', 'viewer')).toEqual({ label: 'ci · viewer', detail: 'nightly' });
    expect(whoLabel('(odd)', 'admin')).toEqual({ label: '(odd) · admin', detail: null });
  });

  it('has a favicon, an SVG the build copies beside index.html', () => {
    expect(fs.readFileSync(new URL('../web/index.html', import.meta.url), 'utf8')).toContain('<link rel="icon" type="image/svg+xml" href="/favicon.svg">');
    expect(fs.readFileSync(new URL('../web/public/favicon.svg', import.meta.url), 'utf8')).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  });
});

describe("the retry form's command field", () => {
  // What an <input type=text> keeps of a value: the HTML standard's sanitization strips line breaks.
  const field = (v: string) => v.replace(/[\r\n]/g, '');
  /** What Retry sends for the command when the field is left as it was shown. */
  const untouched = (command: string[]) => editedCommand(field(commandField(command)).trim(), commandField(command));

  it("shows a /bin/sh -c job's script, other argv as JSON, every argument exact", () => {
    expect(commandField(['/bin/sh', '-c', "python train.py --name 'my run'"])).toBe("python train.py --name 'my run'");
    expect(commandField(['python', 'train.py', '--name', 'my run', "it's"])).toBe(`["python","train.py","--name","my run","it's"]`);
  });

  it('sends no command when the field is left as shown, a multi-line script too (the field would have run it together)', () => {
    const script = ['/bin/sh', '-c', 'echo one\necho two'];
    expect(commandField(script)).toBe(JSON.stringify(script));
    for (const c of [script, ['/bin/sh', '-c', ' sleep 1 '], ['python', 'train.py', '--name', 'my run']]) expect(untouched(c), c.join(' ')).toBeUndefined();
  });

  it('sends an edit as a script for /bin/sh -c, or as argv when it is JSON', () => {
    expect(editedCommand('sleep 6', 'sleep 1')).toBe('sleep 6');
    expect(editedCommand('["python","eval.py"]', '["python","train.py"]')).toEqual(['python', 'eval.py']);
    expect(() => editedCommand('["python"', 'true')).toThrow(SyntaxError);
  });
});

describe("the job page's rank tabs", () => {
  it("offer a tab per rank of a gang attempt, from its config's nodes", () => {
    expect(logRanks({ nodes: 3, gpus: 8 })).toEqual([0, 1, 2]);
    expect(rankTabs(logRanks({ nodes: 2 }))).toEqual([
      { rank: 0, label: 'rank 0' },
      { rank: 1, label: 'rank 1' },
    ]);
  });

  it('show none for a single-node attempt, one recorded before gangs, or a config that makes no sense', () => {
    for (const config of [{ nodes: 1 }, { gpus: 1 }, undefined, { nodes: 0 }, { nodes: '2' }, { nodes: 1.5 }]) {
      expect(logRanks(config), JSON.stringify(config)).toEqual([0]);
      expect(rankTabs(logRanks(config))).toEqual([]);
    }
  });
});

describe("a run's artifacts", () => {
  it('shows images by their extension and small text files as text; the rest only downloads', () => {
    expect(previewOf('plots/loss.PNG', 10)).toEqual({ kind: 'image', type: 'image/png' });
    expect(previewOf('a.jpeg', 10)).toEqual({ kind: 'image', type: 'image/jpeg' });
    expect(previewOf('d.svg', 10)).toEqual({ kind: 'image', type: 'image/svg+xml' });
    expect(previewOf('huge.png', IMAGE_MAX_BYTES + 1)).toEqual({ kind: 'too-large', max: IMAGE_MAX_BYTES });
    for (const name of ['a.txt', 'config.json', 'c.yaml', 'c.yml', 'README.md', 'train.log', 'm.csv']) expect(previewOf(name, TEXT_MAX_BYTES)).toEqual({ kind: 'text' });
    expect(previewOf('train.log', TEXT_MAX_BYTES + 1)).toEqual({ kind: 'too-large', max: TEXT_MAX_BYTES });
    for (const name of ['model.bin', 'weights.pt', 'Makefile', '.json', 'page.html']) expect(previewOf(name, 10)).toBeNull();
  });

  it("names a run's artifacts under its experiment's MLflow id: 0 for MLflow's Default and for no experiment", () => {
    expect(artifactRoot({ id: 'run-1', experiment_id: 'exp-9', project: 'vision', experiment: 'resnet' })).toBe('exp-9/run-1/artifacts');
    expect(artifactRoot({ id: 'run-1', experiment_id: 'exp-1', project: 'default', experiment: 'Default' })).toBe('0/run-1/artifacts');
    expect(artifactRoot({ id: 'run-1', experiment_id: null, project: null, experiment: null })).toBe('0/run-1/artifacts');
  });
});
