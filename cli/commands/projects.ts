import { Command, InvalidArgumentError } from 'commander';
import type { ProjectIdentityJson, ProjectListJson } from '../api-types.ts';
import { clientOf, out } from '../client-of.ts';
import { table } from '../table.ts';

function id(what: string) {
  return (v: string): number => {
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 4_294_967_294) throw new InvalidArgumentError(`${JSON.stringify(v)} is not a ${what} from 1 to 4294967294 (never 0: jobs do not run as root)`);
    return Number(v);
  };
}

/** A project's identity in words. */
export function identityText(p: ProjectIdentityJson): string {
  const i = p.identity;
  if (!i) return `project ${p.project} has no job user yet: its first attempt gets a uid of the control plane's pool`;
  return `project ${p.project} runs its jobs as ${i.user} (uid ${i.uid}, gid ${i.gid}) on every node, ${i.source === 'admin' ? 'set by an admin' : "given from the control plane's pool"}`;
}

/** `gpuctl projects`, `gpuctl project set-user PROJECT --user NAME | --uid N [--group NAME | --gid N] | --clear`. */
export function registerProjectCommands(program: Command): void {
  program
    .command('projects')
    .description('the projects you may read, each with the Unix user its jobs run as on every node')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }, cmd: Command) => {
      const r = await clientOf(cmd).request<ProjectListJson>('GET', '/projects');
      if (o.json) return out(JSON.stringify(r));
      const rows = r.projects.map((p) => [p.project, p.identity?.user ?? '-', p.identity?.uid ?? '-', p.identity?.gid ?? '-', p.identity ? (p.identity.source === 'admin' ? 'set-user' : 'pool') : 'not yet']);
      out(table(['PROJECT', 'JOB USER', 'UID', 'GID', 'FROM'], rows, {}, 'no projects'));
    });
  const project = program.command('project').description('one project: the Unix user its jobs run as (admins)');
  project
    .command('set-user')
    .description("run a project's jobs as an existing Unix user on every node, so its files on shared storage belong to the team's account (admins); --clear goes back to a uid of the pool")
    .argument('<project>', 'project name (created on first use)')
    .option('--user <name>', "an existing user's name (its uid, and its primary group unless --group/--gid)")
    .option('--uid <n>', 'a uid (with gid = uid unless --group/--gid)', id('uid'))
    .option('--group <name>', "an existing group's name")
    .option('--gid <n>', 'a gid', id('gid'))
    .option('--clear', "back to a uid of the control plane's pool")
    .option('--json', 'print JSON')
    .action(async (name: string, o: { user?: string; uid?: number; group?: string; gid?: number; clear?: boolean; json?: boolean }, cmd: Command) => {
      if (o.clear && (o.user !== undefined || o.uid !== undefined || o.group !== undefined || o.gid !== undefined)) throw new InvalidArgumentError('--clear takes no --user, --uid, --group or --gid');
      if (!o.clear && (o.user === undefined) === (o.uid === undefined)) throw new InvalidArgumentError('give exactly one of --user NAME and --uid N (or --clear)');
      if (o.group !== undefined && o.gid !== undefined) throw new InvalidArgumentError('give at most one of --group and --gid');
      const at = `/projects/${encodeURIComponent(name)}/job-user`;
      const body = { ...(o.user !== undefined ? { user: o.user } : {}), ...(o.uid !== undefined ? { uid: o.uid } : {}), ...(o.group !== undefined ? { group: o.group } : {}), ...(o.gid !== undefined ? { gid: o.gid } : {}) };
      const r = o.clear ? await clientOf(cmd).request<ProjectIdentityJson>('DELETE', at) : await clientOf(cmd).request<ProjectIdentityJson>('PUT', at, body);
      out(o.json ? JSON.stringify(r) : identityText(r));
    });
}
