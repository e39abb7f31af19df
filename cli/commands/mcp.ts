/** `gpuctl mcp`: GPUPlane's tools for AI agents, an MCP server over stdio (cli/mcp.ts; docs/mcp.md). */
import type { Command } from 'commander';
import { clientOf } from '../client-of.ts';

export function registerMcpCommand(program: Command): void {
  program
    .command('mcp')
    .description("an MCP server over stdio for AI agents (coding assistants): submit, watch, read logs, retry, checkpoints, forks, sweeps; each tool calls the API with this gpuctl's token and role")
    .action(async (_o, cmd: Command) => {
      // Loaded here, not with the program: the MCP SDK and its schemas take half a second to load,
      // which every other gpuctl command would pay at start.
      const { serveMcp } = await import('../mcp.ts');
      await serveMcp(clientOf(cmd));
    });
}
