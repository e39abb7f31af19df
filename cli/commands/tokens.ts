import { Command, Option } from 'commander';
import { loadConfig } from '../../config.ts';
import { loginApiUrlFile, loginTokenFile, writeApiUrlFile, writeTokenFile } from '../../runtime/credentials.ts';
import type { CreatedTokenJson, TokenJson, WhoAmIJson } from '../api-types.ts';
import { GpuplaneClient } from '../client.ts';
import { clientOf, out } from '../client-of.ts';
import { table } from '../table.ts';

const describe = (w: WhoAmIJson) =>
  w.role === 'node' ? `node token "${w.name}" of ${w.node_id}` : w.role === 'admin' ? `admin "${w.name}"` : `${w.role} "${w.name}" of ${w.projects.join(', ')}`;

/** `gpuctl login`, `gpuctl whoami`, `gpuctl token create|list|revoke`. */
export function registerTokenCommands(program: Command): void {
  program
    .command('login')
    .description('check a token against the API and keep it for gpuctl and the SDKs on this machine (<home>/token and <home>/api-url, 0600)')
    .requiredOption('--token <token>', 'the token an admin gave you (gpuctl token create)')
    .option('--json', 'print JSON')
    .action(async (o: { token: string; json?: boolean }, cmd: Command) => {
      const api = cmd.optsWithGlobals<{ api?: string }>().api ?? loadConfig().apiUrl;
      const who = await new GpuplaneClient(api, { token: o.token }).request<WhoAmIJson>('GET', '/whoami');
      const home = loadConfig().home;
      const file = loginTokenFile(home);
      writeTokenFile(file, o.token);
      // The SDKs read the address beside the token: a script finds the API this token is for.
      const urlFile = loginApiUrlFile(home);
      writeApiUrlFile(urlFile, api);
      if (o.json) return out(JSON.stringify({ ...who, saved_in: file, api_url_saved_in: urlFile }));
      out(`logged in to ${api} as ${describe(who)}; token kept in ${file}, the address in ${urlFile}`);
    });
  program
    .command('whoami')
    .description('who the token gpuctl sends is')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }, cmd: Command) => {
      const who = await clientOf(cmd).request<WhoAmIJson>('GET', '/whoami');
      out(o.json ? JSON.stringify(who) : describe(who));
    });

  const token = program.command('token').description('API tokens (admins): make, list and revoke them');
  token
    .command('create')
    .description('make a token; it is printed once, only its hash is kept')
    .requiredOption('--name <name>', 'who or what it is for')
    .addOption(new Option('--role <role>', 'what it may do (metrics: only scrape GET /metrics, for Prometheus)').choices(['admin', 'member', 'viewer', 'node', 'metrics']).makeOptionMandatory())
    .option('--project <name>', 'member/viewer: a project it may touch (repeatable; * for all)', (v: string, p: string[] = []) => [...p, v])
    .option('--node <id>', 'node: the node it speaks for')
    .option('--json', 'print JSON')
    .action(async (o: { name: string; role: string; project?: string[]; node?: string; json?: boolean }, cmd: Command) => {
      const t = await clientOf(cmd).request<CreatedTokenJson>('POST', '/tokens', { name: o.name, role: o.role, ...(o.project ? { projects: o.project } : {}), ...(o.node ? { node_id: o.node } : {}) });
      if (o.json) return out(JSON.stringify(t));
      out(t.token);
      process.stderr.write(`token ${t.id} (${t.role}${t.projects.length ? ` of ${t.projects.join(', ')}` : ''}${t.node_id ? ` for ${t.node_id}` : ''}); it is not shown again\n`);
    });
  token
    .command('list')
    .description('tokens, without their secrets')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }, cmd: Command) => {
      const { tokens } = await clientOf(cmd).request<{ tokens: TokenJson[] }>('GET', '/tokens');
      if (o.json) return out(JSON.stringify(tokens));
      out(table(['ID', 'NAME', 'ROLE', 'SCOPE', 'CREATED', 'REVOKED'], tokens.map((t) => [t.id, t.name, t.role, t.node_id ?? t.projects.join(','), t.created_at, t.revoked_at ?? '']), {}, 'no tokens'));
    });
  token
    .command('revoke')
    .description('revoke a token (API replicas stop taking it within 5 s)')
    .argument('<id>', 'token id (gpuctl token list)')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }, cmd: Command) => {
      const t = await clientOf(cmd).request<TokenJson>('DELETE', `/tokens/${encodeURIComponent(id)}`);
      out(o.json ? JSON.stringify(t) : `revoked ${t.id} (${t.name})`);
    });
}
