// The process an agent starts for each attempt: it leads the attempt's process group, runs the
// job's command inside it, and reports how the command ended on fd 3, a socket to the agent.
// When that socket closes without a word from the agent (the agent died), the shim kills the
// whole group: an attempt never outlives the agent that answers for it (fencing).
//
//   node job-shim.mjs <graceMs> <cmd> [args...]
import { spawn } from 'node:child_process';
import net from 'node:net';

const [graceArg, cmd, ...args] = process.argv.slice(2);
const graceMs = Number(graceArg) || 10_000;
const agent = new net.Socket({ fd: 3, readable: true, writable: true });
let reported = false;

const report = (msg) => {
  reported = true;
  agent.write(`${JSON.stringify(msg)}\n`, () => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
};

// A TERM for the group is meant for the command; the shim stays to report how it ended.
process.on('SIGTERM', () => undefined);
process.on('SIGINT', () => undefined);

const child = spawn(cmd, args, { stdio: 'inherit' });
child.once('error', (err) => report({ spawnError: err.code === 'ENOENT' ? 'ENOENT' : err.message }));
child.once('exit', (code, signal) => report({ code, signal }));

const fence = () => {
  if (reported) return;
  try {
    process.kill(-process.pid, 'SIGTERM');
  } catch {}
  setTimeout(() => {
    try {
      process.kill(-process.pid, 'SIGKILL');
    } catch {}
  }, graceMs).unref();
};
agent.on('end', fence);
agent.on('close', fence);
agent.on('error', fence);
agent.resume();
