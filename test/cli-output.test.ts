import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { JobJson, NodeJson } from '../cli/client.ts';
import type { Command, Option } from 'commander';
import { paramValue } from '../cli/args.ts';
import { buildProgram } from '../cli/main.ts';
import { agentGoneLine, quarantineLines, renderJobs, renderNodes, submitWarning } from '../cli/render.ts';
import { age, cell, keyValues, table } from '../cli/table.ts';
import { shellJoin } from '../domain/shell-quote.ts';

const BOX = /[\u2500-\u257f]/;

describe('CLI tables', () => {
  it('are borderless and uncoloured, with capital headers and columns two or more spaces apart', () => {
    const out = table(['ID', 'STATE'], [['job-1', 'RUNNING'], ['job-22', 'FAILED']]);
    expect(out).toBe(['ID       STATE', 'job-1    RUNNING', 'job-22   FAILED'].join('\n'));
    expect(out).not.toMatch(BOX);
    expect(out).not.toContain('\x1b');
  });

  it('cut long cells to their column width and keep a row on one line', () => {
    const out = table(['ID', 'REASON'], [['job-1', `a\nb\t${'x'.repeat(100)}`]], { REASON: 20 });
    const lines = out.split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toBe(`job-1   a b ${'x'.repeat(15)}…`);
  });

  it('strip colour codes and control characters that a job log put in a reason', () => {
    expect(cell('\x1b[31mCUDA out of memory\x1b[0m\r\n')).toBe('CUDA out of memory');
    expect(keyValues([['reason', '\x1b[1mbad\x1b[0m\x07 end'], ['exit', null]])).toBe('reason: bad end\nexit:   -');
  });

  it('print jobs with a kubectl-style AGE and a bounded width', () => {
    const now = Date.parse('2025-01-01T12:00:00Z');
    const job = {
      id: 'job-abc',
      type: 'TRAIN',
      state: 'FAILED',
      attempt: 1,
      gpus: 1,
      priority: 0,
      node_id: 'n1',
      gpu_indices: [0],
      reason: 'exit code 3 — hint: '.padEnd(500, 'z'),
      command: ['python', 'train.py', '--run-name', 'my first run', ...Array.from({ length: 50 }, (_, i) => `--flag-${i}`)],
      created_at: '2025-01-01T11:55:00Z',
    } as JobJson;
    const out = renderJobs([job], now);
    expect(out.split('\n')[0]).toMatch(/^ID\s{2,}TYPE\s{2,}STATE\s{2,}PROJECT\s{2,}ATT\s{2,}GPUS\s{2,}PRIO\s{2,}NODE\s{2,}CARDS\s{2,}AGE\s{2,}COMMAND\s{2,}REASON$/);
    // The command shell-quoted as `gpuctl job` prints it, cut to 30 characters.
    expect(out).toMatch(/ {2}5m {2,}python train\.py --run-name 'm… {2,}exit code 3 — hint: z+…$/m);
    expect(Math.max(...out.split('\n').map((l) => l.length))).toBeLessThan(160);
  });

  it("print a waiting job's reason whole, an ended job's cut", () => {
    const now = Date.parse('2025-01-01T12:00:00Z');
    const base = { type: 'CUSTOM', attempt: 1, gpus: 1, nodes: 1, priority: 0, node_id: null, gpu_indices: null, command: ['true'], created_at: '2025-01-01T11:55:00Z' };
    const held = 'held: behind job job-starved-one, which reserves node n17 (waited past GPUPLANE_BACKFILL_HOLD_S)';
    const out = renderJobs([{ ...base, id: 'job-q', state: 'QUEUED', reason: held } as JobJson, { ...base, id: 'job-f', state: 'FAILED', reason: 'x'.padEnd(300, 'y') } as JobJson], now);
    expect(out.split('\n')[1].endsWith(` ${held}`)).toBe(true);
    expect(out.split('\n')[2]).toMatch(new RegExp(` xy{${[...held].length - 2}}…$`));
  });

  it('show ages and commands as people read them', () => {
    const now = Date.parse('2025-01-10T00:00:00Z');
    expect(['2025-01-09T23:59:15Z', '2025-01-09T23:30:00Z', '2025-01-09T20:00:00Z', '2025-01-01T00:00:00Z'].map((t) => age(t, now))).toEqual(['45s', '30m', '4h', '9d']);
    expect(shellJoin(['sh', '-c', "echo 'hi' && exit 3", ''])).toBe(`sh -c 'echo '\\''hi'\\'' && exit 3' ''`);
  });

  it('quote a command one way for gpuctl and the console (domain/shell-quote.ts): a shell splits it back into the same argv', () => {
    const argv = ['python', 'train.py', '--name', 'my run', "it's", '', '--lr=3e-4', 'a"b', '$HOME', '*.ckpt'];
    const line = shellJoin(argv);
    expect(line).toBe(`python train.py --name 'my run' 'it'\\''s' '' --lr=3e-4 'a"b' '$HOME' '*.ckpt'`);
    // What /bin/sh makes of the line: the same words, one per line (printf repeats its format).
    const words = execFileSync('/bin/sh', ['-c', `printf '%s\\n' ${line}`], { encoding: 'utf8' });
    expect(words).toBe(argv.map((a) => `${a}\n`).join(''));
  });

  it('warn at submit about a job no ONLINE node could take, and only then', () => {
    const job = { id: 'job-big', state: 'CREATED', reason: 'no ONLINE node has 9 cards (largest: 4)' } as JobJson;
    expect(submitWarning(job)).toBe('gpuctl: warning: job-big stays queued until a node can take it: no ONLINE node has 9 cards (largest: 4)');
    expect(submitWarning({ ...job, reason: null })).toBeNull();
    expect(submitWarning({ ...job, state: 'FAILED' })).toBeNull();
  });

  it("read submit's --param and retry's --set values by one rule", () => {
    const option = (command: string, flag: string) => (buildProgram() as Command).commands.find((c) => c.name() === command)!.options.find((o) => o.long === flag)! as Option & { parseArg: (v: string, prev: unknown) => Record<string, unknown> };
    const param = option('submit', '--param');
    const set = option('retry', '--set');
    const cases: [string, unknown][] = [
      ['3e-4', 3e-4], ['1E+2', 100], ['-0.5', -0.5], ['.5', 0.5], ['42', 42], ['true', true], ['false', false], ['null', null],
      ['[1,2]', [1, 2]], ['{"a":1}', { a: 1 }], ['"007"', '007'], ['abc', 'abc'], ['{oops', '{oops'], ['1e999', '1e999'], ['0x10', '0x10'], ['', ''], ['a=b', 'a=b'],
    ];
    for (const [raw, want] of cases) {
      expect(paramValue(raw), raw).toEqual(want);
      expect(param.parseArg(`k=${raw}`, {}), raw).toEqual({ k: want });
      expect(set.parseArg(`k=${raw}`, {}), raw).toEqual({ k: want });
    }
  });

  it('print "no jobs" / "no nodes" for an empty list, not a lone header', () => {
    expect(renderJobs([])).toBe('no jobs');
    expect(renderNodes([])).toBe('no nodes');
  });

  it('show every default in --help as words, never as {} or JSON', () => {
    const all = (c: Command): Command[] => [c, ...c.commands.flatMap(all)];
    const commands = all(buildProgram() as Command);
    expect(commands.length).toBeGreaterThan(25);
    for (const c of commands) expect(c.helpInformation(), c.name()).not.toMatch(/default: [{[]/);
  });

  it("start every error with gpuctl:, commander's own too", () => {
    const errs: string[] = [];
    const program = buildProgram().exitOverride();
    for (const c of program.commands) c.exitOverride().configureOutput({ writeErr: (s) => errs.push(s) });
    program.configureOutput({ writeErr: (s) => errs.push(s) });
    for (const argv of [['submit', '--bogus', '--', 'true'], ['submit', '--gpus', 'x', '--', 'true'], ['nope']]) {
      expect(() => program.parse(argv, { from: 'user' })).toThrow();
    }
    expect(errs).toHaveLength(3);
    for (const e of errs) expect(e).toMatch(/^gpuctl: \S[^\n]*\n$/);
  });

  it('name gpuctl node resume under the table for a quarantined node, and say when no other ONLINE node takes jobs', () => {
    const why = 'quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h (job-c#1 LOST, job-b#1 LOST, job-a#1 LOST); gpuctl node resume once it is fixed';
    const n = (id: string, drained: NodeJson['drained'] = null) => ({ id, hostname: 'h', address: null, labels: {}, status: 'ONLINE', last_seen_at: '2025-01-01T00:00:00Z', drained, gpus: [] }) as unknown as NodeJson;
    const vm = n('vm', { at: '2025-01-01T00:00:00Z', reason: why, by: 'gpuplane (quarantine)' });
    const lines = renderNodes([vm]).split('\n');
    expect(lines.at(-1)).toBe('node vm is quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h; no other ONLINE node takes jobs, so they all wait for it: gpuctl node resume vm once it is fixed');
    expect(quarantineLines([vm, n('vm2')])).toEqual(['node vm is quarantined: 3 attempts ended LOST or with a GPU/driver error within 1 h: gpuctl node resume vm once it is fixed']);
    // An admin's drain is the admin's: nothing under the table.
    expect(quarantineLines([n('d2', { at: '2025-01-01T00:00:00Z', reason: 'disk swap', by: 'ops' })])).toEqual([]);
  });

  it("say under the table that a node's agent is gone, since when, and whether its peer keeper still speaks for it", () => {
    const now = Date.parse('2025-01-01T12:00:00Z');
    const peer = { verdict: 'fine', reason: 'heard 0.4 s ago', since: null, reported_at: '2025-01-01T11:59:59.600Z', addr: '10.0.0.7:7000', witnesses: [], ignored_packets: null, agent_alive: false, agent_gone_since: '2025-01-01T11:59:48Z' } as NonNullable<NodeJson['peer']>;
    const node = { id: 'n1', hostname: 'h', address: null, labels: {}, status: 'ONLINE', last_seen_at: '2025-01-01T11:59:50Z', drained: null, gpus: [], peer } as NodeJson;
    const lines = renderNodes([node], now).split('\n');
    expect(lines.slice(-3)).toEqual(['WITNESSES (who last heard each node, by their reports)', '  n1: none reporting', '    agent gone 12 s, keeper speaking']);
    expect(agentGoneLine({ ...peer, reported_at: '2025-01-01T11:55:00Z', agent_gone_since: '2025-01-01T11:50:00Z' }, now)).toBe('agent gone 10 min, keeper silent 5 min');
    expect(agentGoneLine({ ...peer, agent_alive: true, agent_gone_since: null }, now)).toBeNull();
    expect(agentGoneLine({ ...peer, agent_alive: null, agent_gone_since: null }, now)).toBeNull();
  });

  it("count a card held by another project's job as busy, its owner unnamed", () => {
    const gpu = { uuid: 'u', name: 'H200', memory_mb: 1, present: true, owner_attempt: null };
    const node = { id: 'n1', hostname: 'h', address: '10.0.0.7', labels: {}, status: 'ONLINE', last_seen_at: '2025-01-01T00:00:00Z', gpus: [{ ...gpu, index: 0, busy: true, owner_job_id: null }, { ...gpu, index: 1, busy: false, owner_job_id: null }] } as NodeJson;
    expect(renderNodes([node]).split('\n')[1]).toMatch(/^n1 +ONLINE +10\.0\.0\.7 +2 +1 +busy:0$/);
  });

  it('print each job with its project, and an EVALUATE job with its checkpoint', () => {
    const now = Date.parse('2025-01-01T12:00:00Z');
    const base = { attempt: 1, gpus: 1, priority: 0, node_id: null, gpu_indices: null, reason: null, created_at: '2025-01-01T11:55:00Z' };
    const jobs = [
      { ...base, id: 'job-t', type: 'TRAIN', state: 'QUEUED', project: 'vision', checkpoint_id: null, command: ['python', 'train.py'] },
      { ...base, id: 'job-e', type: 'EVALUATE', state: 'QUEUED', project: 'vision', checkpoint_id: 'ckpt-7', command: ['python', 'eval.py'] },
    ] as JobJson[];
    const lines = renderJobs(jobs, now).split('\n');
    expect(lines[1]).toMatch(/^job-t +TRAIN +QUEUED +vision +1 +1 +0 +5m +python train\.py$/);
    expect(lines[2]).toMatch(/^job-e +EVALUATE +QUEUED +vision +1 .* 5m +python eval\.py +evaluates ckpt-7$/);
  });
});
