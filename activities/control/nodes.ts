import { log } from '@temporalio/activity';
import { setNodeOffline, upsertNodeOnline } from '../../db/queries/nodes.ts';
import { nodeHasToken } from '../../db/queries/tokens.ts';
import type { NodeInventory } from '../../domain/node.ts';
import type { ControlContext } from './context.ts';

/** The activities of the node workflow: a node joins the pool, or leaves it. */
export function nodeActivities({ deps, wake }: ControlContext) {
  const { db } = deps;

  return {
    /**
     * A node joins the pool only when it has a live node token: Temporal takes anyone's
     * `nodeOnline`, so a node id nobody made a token for is never given work (and its cards
     * never show as free). Returns whether it was taken.
     */
    async markNodeOnline(a: { inventory: NodeInventory }): Promise<boolean> {
      if (!(await nodeHasToken(db, a.inventory.nodeId))) {
        log.warn(`node ${a.inventory.nodeId} reported itself online but has no node token: not scheduled on (gpuctl token create --role node --node ${a.inventory.nodeId}, then restart its agent with --token)`);
        return false;
      }
      await db.transaction((tx) => upsertNodeOnline(tx, a.inventory));
      await wake();
      return true;
    },

    async markNodeOffline(a: { nodeId: string }): Promise<void> {
      await setNodeOffline(db, a.nodeId);
    },
  };
}
