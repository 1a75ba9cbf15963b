// The fleet: the masters (the answering node's view of the cluster and its
// indexes) and every member of GET /squall/v1/fleet: masters, and the
// engines and satellites that report to them, stale ones marked.
import { el, fill, $ } from './dom.js';

const dash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 2 ? 'now' : `${s}s ago`;
}

export async function loadFleet(session) {
  const out = $('fleet');
  try {
    const [c, f] = await Promise.all([
      session.request('GET', '/squall/v1/cluster'),
      session.request('GET', '/squall/v1/fleet'),
    ]);
    const cols = ['role', 'id', 'site', 'version', 'ready', 'consumer lag', 'spool depth', 'webhooks', 'address', 'last report'];
    fill(out,
      el('p', {}, `Answered by ${c.node_id} (${c.state}); leader ${c.leader_id || 'none'}, term ${c.term}, commit index ${c.commit_index}, applied ${c.applied_index}, active tree at index ${c.active_index}.`),
      el('div', { class: 'table-wrap' }, el('table', { id: 'fleet-members' },
        el('thead', {}, el('tr', {}, cols.map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, f.members.map((m) => el('tr', { 'data-member': `${m.role}/${m.id}`, class: m.stale ? 'stale' : null },
          el('td', {}, m.role, m.leader ? ' (leader)' : '', m.role === 'master' && m.suffrage !== 'voter' ? ` (${m.suffrage})` : ''),
          el('td', {}, m.id), el('td', {}, dash(m.site)), el('td', { class: 'mono' }, dash(m.version)),
          el('td', { 'data-ready': String(m.ready) }, m.ready ? 'ready' : 'not ready', m.reasons && m.reasons.length ? `: ${m.reasons.join('; ')}` : ''),
          el('td', {}, dash(m.consumer_lag)), el('td', {}, dash(m.spool_depth)), el('td', {}, dash(m.webhooks_loaded)),
          el('td', { class: 'mono' }, dash(m.http_addr || m.raft_addr)),
          el('td', {}, m.role === 'master' ? '—' : ago(m.last_seen_ms), m.stale ? ' (stale)' : '')))))),
      el('p', { class: 'hint' }, 'Engines and satellites report every few seconds; one that stops is marked stale after 30 s and dropped after 5 minutes.'));
  } catch (e) {
    fill(out, el('p', { class: 'error' }, `${e.code ? e.code + ': ' : ''}${e.message}`));
  }
}
