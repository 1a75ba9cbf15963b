// The active tree's place in the cluster, above the tree: the raft index
// of its deploy (GET /squall/v1/cluster, a root token's view; other
// tokens see nothing here).
import { fill } from './dom.js';

export async function showActiveInfo(session, out, source) {
  fill(out);
  if (source !== 'active') return;
  try {
    const c = await session.request('GET', '/squall/v1/cluster');
    fill(out, `Active tree: deployed at raft index ${c.active_index}.`);
    out.dataset.activeIndex = String(c.active_index);
  } catch {
    // Not a root token, or no answer: the tree itself is what matters.
  }
}
