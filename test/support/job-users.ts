import { execFileSync } from 'node:child_process';

/**
 * Why this machine cannot run an agent with job users, or null when it can: root, and nft for the
 * job users' port guard (unshare and setpriv come with util-linux). `notRoot` says what the file
 * loses without root, for the skip's reason.
 */
export function jobUsersSkipReason(notRoot: string): string | null {
  if (process.getuid?.() !== 0) return `not root: ${notRoot}`;
  try {
    execFileSync('nft', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'nft is missing (scripts/setup.sh installs nftables)';
  }
  return null;
}
