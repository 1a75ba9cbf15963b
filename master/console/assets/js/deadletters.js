// Dead letters: the events the engines could not finish, from GET
// /squall/v1/deadletters. The reasons of those read, grouped and counted
// (a click filters by one); a page of dead letters; one of them with its
// headers and event, and Replay (POST .../replay) for a token that may.
import { el, fill, $, pretty, status } from './dom.js';

const base = '/squall/v1/deadletters';

// deadLetterAccess says what the token may do with dead letters: an
// authorization on the root with deadletters_read, deadletters_replay or
// admin (the server decides in the end).
export function deadLetterAccess(claims) {
  const access = { read: false, replay: false };
  for (const a of Object.values((claims && claims.auths) || {})) {
    const p = a.path || [];
    if (p.length !== 1 || p[0] !== 'root') continue;
    const r = a.roles || [];
    if (r.includes('admin') || r.includes('deadletters_replay')) { access.read = true; access.replay = true; }
    if (r.includes('deadletters_read')) access.read = true;
  }
  return access;
}

const when = (t) => (t ? String(t).replace('T', ' ').slice(0, 19) : '—');
const errorText = (e) => `${e.code ? e.code + ': ' : ''}${e.message}`;

export class DeadLetters {
  constructor(session) {
    this.session = session;
    this.cursors = [''];
    const form = $('deadletters-form');
    form.addEventListener('submit', (e) => { e.preventDefault(); this.cursors = ['']; this.load(); });
    $('deadletters-next').addEventListener('click', () => { this.cursors.push(this.next); this.load(); });
    $('deadletters-prev').addEventListener('click', () => { this.cursors.pop(); this.load(); });
  }

  query() {
    const f = $('deadletters-form').elements;
    const q = new URLSearchParams({ limit: '25' });
    for (const k of ['stage', 'reason', 'error', 'webhook', 'since']) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    const c = this.cursors[this.cursors.length - 1];
    if (c) q.set('cursor', c);
    return q;
  }

  async load() {
    $('deadletters-error').textContent = '';
    const body = $('deadletters-table').tBodies[0];
    try {
      const p = await this.session.request('GET', `${base}?${this.query()}`);
      this.next = p.next || '';
      this.reasons(p);
      fill(body, p.dead_letters.map((l) => el('tr', { tabindex: 0, 'data-id': l.id,
        onclick: () => this.show(l.id), onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.show(l.id); } } },
      el('td', {}, when(l.dead_at)), el('td', { 'data-reason': l.reason }, l.reason), el('td', {}, l.webhook || '—'),
      el('td', {}, String(l.replay_count), l.replayed ? el('span', { 'data-replayed': '' }, ' (replayed)') : null),
      el('td', { class: 'mono' }, l.error))));
      if (!p.dead_letters.length) body.append(el('tr', {}, el('td', { colspan: 5, class: 'hint' }, 'No dead letter matches.')));
      $('deadletters-page').textContent = `${p.matched} matching of ${p.scanned} records read${p.complete ? '' : ' (a scan limit stopped the read: Next continues)'}`;
      $('deadletters-prev').disabled = this.cursors.length <= 1;
      $('deadletters-next').disabled = !this.next;
    } catch (e) {
      fill(body);
      fill($('deadletters-reasons'));
      $('deadletters-error').textContent = errorText(e);
    }
  }

  // reasons lists the reasons counted; a click filters by one, and a
  // token that may replay replays those of one reason (the form's other
  // filters apply), after a second click that confirms.
  reasons(p) {
    const f = $('deadletters-form').elements;
    const replay = deadLetterAccess(this.session.claims()).replay;
    fill($('deadletters-reasons'), p.reasons.length ? el('table', {},
      el('thead', {}, el('tr', {}, ['Reason', 'Count', 'Example', replay ? '' : null].filter((h) => h !== null).map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, p.reasons.map((r) => el('tr', { 'data-reason': r.reason },
        el('td', {}, el('button', { type: 'button', class: 'link', onclick: () => { f.reason.value = r.reason; this.cursors = ['']; this.load(); } }, r.reason)),
        el('td', { 'data-count': String(r.count) }, String(r.count)), el('td', { class: 'mono' }, r.example),
        replay ? el('td', {}, this.replayReasonButton(r)) : null)))) : null,
    el('p', { id: 'deadletters-replay-summary', role: 'status' }));
  }

  replayReasonButton(r) {
    const b = el('button', { type: 'button', 'data-replay-reason': r.reason }, 'Replay all…');
    b.addEventListener('click', async () => {
      if (!b.dataset.armed) {
        b.dataset.armed = 'true';
        b.textContent = `Confirm: replay the dead letters of ${r.reason}`;
        return;
      }
      b.disabled = true;
      const f = $('deadletters-form').elements;
      const filter = { reason: r.reason };
      for (const k of ['stage', 'error', 'webhook', 'since']) if (f[k].value.trim()) filter[k] = f[k].value.trim();
      try {
        const ans = await this.session.request('POST', `${base}/replay`, { filter });
        const counts = {};
        for (const x of ans.results) counts[x.status] = (counts[x.status] || 0) + 1;
        const summary = Object.entries(counts).map(([k, n]) => `${n} ${k.replace('_', ' ')}`).join(', ') || 'nothing to replay';
        await this.load();
        const out = $('deadletters-replay-summary');
        out.textContent = `${r.reason}: ${summary}.`;
        out.dataset.replayed = String(ans.replayed);
      } catch (e) {
        $('deadletters-error').textContent = errorText(e);
      }
    });
    return b;
  }

  async show(id) {
    const out = $('deadletter-details');
    try {
      const l = await this.session.request('GET', `${base}/${id}`);
      const access = deadLetterAccess(this.session.claims());
      const canReplay = access.replay && !l.replayed;
      const result = el('p', { id: 'deadletter-replay-result', role: 'status' });
      fill(out,
        el('h2', {}, `Dead letter ${l.id}`),
        el('p', {}, `${l.reason}, ${when(l.dead_at)}, engine ${l.engine || '—'}, from ${l.origin || '—'}; replayed ${l.replay_count} time${l.replay_count === 1 ? '' : 's'}`,
          l.replayed ? ` (this one by ${l.replayed.by} at ${when(l.replayed.at)})` : ''),
        el('p', { class: 'mono' }, l.error),
        l.rules ? el('p', {}, 'Rules: ', el('span', { class: 'mono' }, l.rules.join(', '))) : null,
        access.replay ? el('button', { type: 'button', id: 'deadletter-replay', disabled: !canReplay, onclick: () => this.replay(l.id, result) }, 'Replay') : null,
        result,
        el('h3', {}, 'Event'),
        el('pre', { id: 'deadletter-event' }, l.event !== undefined ? pretty(l.event) : `(not JSON, base64) ${l.event_base64}`),
        el('h3', {}, 'Headers'),
        el('pre', {}, l.headers.map((h) => `${h.key}: ${h.value}`).join('\n')));
    } catch (e) {
      fill(out, el('p', { class: 'error' }, errorText(e)));
    }
  }

  async replay(id, result) {
    try {
      const ans = await this.session.request('POST', `${base}/replay`, { ids: [id] });
      const r = ans.results[0];
      result.textContent = `${r.status}${r.reason ? ': ' + r.reason : ''}`;
      result.dataset.status = r.status;
      status(`Dead letter ${id}: ${r.status}.`);
      await this.load();
      $('deadletter-replay').disabled = true;
    } catch (e) {
      result.textContent = errorText(e);
    }
  }
}
