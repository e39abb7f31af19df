import { execFileSync } from 'node:child_process';

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

/**
 * A test host of our own: a network namespace joined to this machine by a veth pair on a
 * private /30 that exists only here. cut() and heal() take the namespace's end down and up.
 */
export interface TestHost {
  name: string;
  hostIp: string;
  nsIp: string;
  cut(): void;
  heal(): void;
  remove(): void;
}

export function createTestHost(tag: string, subnet: number): TestHost {
  const name = `gp-${tag}`;
  const hostIf = `gph${subnet}`;
  const nsIf = `gpn${subnet}`;
  const hostIp = `10.231.${subnet}.1`;
  const nsIp = `10.231.${subnet}.2`;
  try {
    ip('link', 'del', hostIf);
  } catch {
    // Left over from an earlier run, or not there.
  }
  try {
    ip('netns', 'del', name);
  } catch {
    // Same.
  }
  ip('netns', 'add', name);
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
  ip('link', 'set', nsIf, 'netns', name);
  ip('addr', 'add', `${hostIp}/30`, 'dev', hostIf);
  ip('link', 'set', hostIf, 'up');
  ip('netns', 'exec', name, 'ip', 'addr', 'add', `${nsIp}/30`, 'dev', nsIf);
  ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'up');
  ip('netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up');
  return {
    name,
    hostIp,
    nsIp,
    cut: () => ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'down'),
    heal: () => ip('netns', 'exec', name, 'ip', 'link', 'set', nsIf, 'up'),
    remove() {
      try {
        ip('link', 'del', hostIf);
      } catch {
        // Gone with the namespace.
      }
      ip('netns', 'del', name);
    },
  };
}
