// The fleet: the masters of the cluster as the node answering sees them.
import { el, fill, $ } from './dom.js';

export async function loadFleet(session) {
  const out = $('fleet');
  try {
    const c = await session.request('GET', '/squall/v1/cluster');
    fill(out,
      el('h2', {}, 'Masters'),
      el('p', {}, `Answered by ${c.node_id} (${c.state}); leader ${c.leader_id || 'none'}, term ${c.term}, commit index ${c.commit_index}, applied ${c.applied_index}, active tree at index ${c.active_index}.`),
      el('div', { class: 'table-wrap' }, el('table', { id: 'fleet-masters' },
        el('thead', {}, el('tr', {}, ['id', 'role', 'raft address', 'HTTP address', 'suffrage', 'leader'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, (c.members || []).map((m) => el('tr', { 'data-member': m.id },
          el('td', {}, m.id), el('td', {}, 'master'), el('td', { class: 'mono' }, m.raft_addr), el('td', { class: 'mono' }, m.http_addr || '—'),
          el('td', {}, m.suffrage), el('td', {}, m.leader ? 'leader' : '')))))),
      el('p', { class: 'hint' }, 'Engines and satellites are not listed yet: they do not report to the masters in this version.'));
  } catch (e) {
    fill(out, el('p', { class: 'error' }, `${e.code ? e.code + ': ' : ''}${e.message}`));
  }
}
