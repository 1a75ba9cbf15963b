// The active tree's version above the tree: its number, when and by whom
// it was deployed (the newest of GET /squall/v1/tree/versions: every
// deploy and rollback records one), or, on a cluster that records no
// versions yet, the raft index of its deploy (GET /squall/v1/cluster, a
// root token's view). A token that may see neither sees nothing here.
import { fill } from './dom.js';

const when = (ms) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';

export async function showActiveInfo(session, out, source) {
  fill(out);
  delete out.dataset.version;
  if (source !== 'active') return;
  const a = session.auth();
  try {
    const ans = await session.request('GET', `/squall/v1/tree/versions?limit=1&auth=${encodeURIComponent(a.name)}`);
    const v = ans.versions && ans.versions[0];
    if (v) {
      fill(out, `Active tree: version ${v.number}, deployed ${when(v.time_ms)} by ${v.author}${v.message ? ` (${v.message})` : ''}${v.rollback_of ? `, a rollback to version ${v.rollback_of}` : ''}.`);
      out.dataset.version = String(v.number);
      return;
    }
  } catch {
    // No versions (an older cluster): the raft index below.
  }
  try {
    const c = await session.request('GET', '/squall/v1/cluster');
    fill(out, `Active tree: deployed at raft index ${c.active_index}.`);
  } catch {
    // Not a root token, or no answer: the tree itself is what matters.
  }
}
