// Hit counts of the active tree, from GET /squall/v1/tree/stats: what the
// engines counted of each node and rule since the tree's deploy.
import { el } from './dom.js';

// loadStats returns the counts of the selected authorization's subtree
// by tree key (tree.js keyOf: the path from the authorization's node,
// and the rule's name), with the tree's index.
export async function loadStats(session) {
  const a = session.auth();
  const s = await session.request('GET', `/squall/v1/tree/stats?auth=${encodeURIComponent(a.name)}`);
  const byKey = new Map();
  const skip = Math.max(0, a.path.length - 1);
  for (const n of s.nodes) {
    const key = n.path.slice(skip).join(',');
    byKey.set(key, n);
    for (const r of n.rules || []) byKey.set(key + '/' + r.name, r);
  }
  return { index: s.tree_index, fromMs: s.window.from_ms, byKey };
}

// neverMatched tells whether the counts say no match since the deploy.
export const neverMatched = (c) => !c || !(c.matched > 0);

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 2) return 'now';
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

// hits is the badge of a node's or rule's counts: its matches, and for
// rules and rulesets when it last matched.
export function hits(c, kind) {
  if (!c) return null;
  const n = c.matched || 0;
  const last = kind === 'Rule' || kind === 'Ruleset' ? (c.last_match_ms ? `, last ${ago(c.last_match_ms)}` : ', never') : '';
  const title = kind === 'Rule'
    ? `reached ${c.reached}, matched ${n}, actions ${c.actions} (succeeded ${c.succeeded}, failed ${c.failed}) since the deploy`
    : `reached ${c.reached}, matched ${n} since the deploy`;
  return el('span', { class: 'hits' + (n ? '' : ' none'), 'data-hits': String(n), title }, ` ${n} hit${n === 1 ? '' : 's'}${last}`);
}
