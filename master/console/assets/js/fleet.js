// The fleet: every member of GET /squall/v1/fleet. Masters come first,
// each with what it answered itself (health, raft state and indexes,
// version); then the engines and satellites that report to the masters,
// stale ones marked. The answering node's view of the cluster is above,
// with a warning for each consumer group whose partitions no live engine
// owns (their events wait).
import { el, fill, $, orDash as dash } from './dom.js';

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 2 ? 'now' : `${s}s ago`;
}

// health is a master's health from its own /readyz, or a reporter's
// readiness.
function health(m) {
  if (m.role === 'master') return { ready: { ready: 'ready', not_ready: 'not ready', unreachable: 'unreachable' }[m.health] || dash(m.health), key: m.health || 'unknown' };
  const said = m.ready ? 'ready' : 'not ready';
  if (m.stale) return { ready: `no heartbeat (last said ${said})`, key: 'stale' };
  return { ready: said, key: m.ready ? 'ready' : 'not_ready' };
}

// rate is an engine's events per second between its last two heartbeats.
function rate(v) {
  if (v === null || v === undefined) return '—';
  return v >= 100 ? String(Math.round(v)) : v.toFixed(1);
}

function raft(m) {
  if (m.role !== 'master') return dash();
  if (m.applied_index === undefined) return dash(m.state);
  return `${m.state}, term ${m.term}, applied ${m.applied_index} / commit ${m.commit_index}`;
}

export async function loadFleet(session) {
  const out = $('fleet');
  try {
    const [c, f] = await Promise.all([
      session.request('GET', '/squall/v1/cluster'),
      session.request('GET', '/squall/v1/fleet'),
    ]);
    const cols = ['role', 'id', 'site', 'version', 'health', 'raft', 'events/s', 'consumer lag', 'spool depth', 'webhooks', 'address', 'last report'];
    const stale = f.members.filter((m) => m.stale).length;
    const unowned = (f.groups || []).filter((g) => g.unowned.length > 0);
    fill(out,
      el('p', {}, `Answered by ${c.node_id} (${c.state}); leader ${dash(c.leader_id)}, term ${c.term}, commit index ${c.commit_index}, applied ${c.applied_index}, active tree at index ${c.active_index}.`),
      stale ? el('p', { class: 'warn', id: 'fleet-stale' }, `${stale} member${stale > 1 ? 's' : ''} stopped reporting (stale).`) : null,
      unowned.map((g) => el('p', { class: 'warn', 'data-unowned-group': g.group },
        `Consumer group ${g.group} (topic ${g.topic}): partition${g.unowned.length > 1 ? 's' : ''} ${g.unowned.join(', ')} of ${g.partitions} ha${g.unowned.length > 1 ? 've' : 's'} no live engine; their events wait (${g.engines} live engine${g.engines === 1 ? '' : 's'}).`)),
      el('div', { class: 'table-wrap' }, el('table', { id: 'fleet-members' },
        el('thead', {}, el('tr', {}, cols.map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, f.members.map((m) => {
          const h = health(m);
          return el('tr', { 'data-member': `${m.role}/${m.id}`, class: m.stale ? 'stale' : null, 'data-stale': String(m.stale) },
            el('td', {}, m.role, m.leader ? ' (leader)' : '', m.role === 'master' && m.suffrage !== 'voter' ? ` (${m.suffrage})` : ''),
            el('td', {}, m.id), el('td', {}, dash(m.site)), el('td', { class: 'mono' }, dash(m.version)),
            el('td', { 'data-ready': String(m.ready), 'data-health': h.key, class: `health-${h.key}` }, h.ready, m.reasons && m.reasons.length ? `: ${m.reasons.join('; ')}` : '',
              m.warnings && m.warnings.length ? el('span', { class: 'warn', 'data-warnings': '' }, ` (warning: ${m.warnings.join('; ')})`) : null),
            el('td', { class: 'mono', 'data-raft': '' }, raft(m)),
            el('td', { 'data-rate': m.events_per_second ?? '' }, rate(m.events_per_second)),
            el('td', {}, dash(m.consumer_lag)), el('td', {}, dash(m.spool_depth)), el('td', {}, dash(m.webhooks_loaded)),
            el('td', { class: 'mono' }, dash(m.http_addr || m.raft_addr)),
            el('td', {}, m.role === 'master' ? dash() : ago(m.last_seen_ms), m.stale ? ' (stale)' : ''));
        })))),
      el('p', { class: 'hint' }, 'Masters are asked for their own state when the list is made. Engines and satellites report every few seconds (--fleet-interval); one that stops is marked stale, then dropped (--fleet-stale-after, --fleet-drop-after on the masters).'));
  } catch (e) {
    fill(out, el('p', { class: 'error' }, `${e.code ? e.code + ': ' : ''}${e.message}`));
  }
}
