// Backtest on the Draft tab: run the draft against the active tree over
// recorded events (POST /squall/v1/backtests; an engine runs it), follow
// its progress, then read the per-rule counts under both trees and the
// events whose outcome differs. The panel builds its own elements under
// #draft-backtest-out; the Draft tab only calls show().
import { el, fill, $, pretty } from './dom.js';

const base = '/squall/v1/backtests';
const poll = 500; // ms between two reads of a running backtest

const errorText = (e) => `${e.code ? e.code + ': ' : ''}${e.message}`;
const num = (n) => Number(n || 0).toLocaleString('en-US');
const finished = (s) => s === 'succeeded' || s === 'failed' || s === 'cancelled';

// backtestAccess: backtests need edit on the root (docs/decisions.md
// decision 64); the server decides in the end.
export function backtestAccess(session) {
  const a = session.auth();
  return !!a && a.path.length === 1 && a.path[0] === 'root' && session.can('edit');
}

// rangeOf turns the form into the request's range fields, or throws a
// message for the user.
export function rangeOf(kind, values) {
  if (kind === 'duration') {
    if (!/^\d+(\.\d+)?(ms|s|m|h)$/.test(values.duration.trim())) throw new Error('Give a duration such as 30m or 1h.');
    return { duration: values.duration.trim() };
  }
  if (kind === 'last') {
    const n = Number(values.last);
    if (!Number.isInteger(n) || n < 1) throw new Error('Give a number of events per partition (1 or more).');
    return { last: n };
  }
  if (!values.from) throw new Error('Give the time the window starts.');
  const r = { from: new Date(values.from).toISOString() };
  if (values.to) r.to = new Date(values.to).toISOString();
  return r;
}

export class DraftBacktest {
  // draft() returns { id, mine } of the draft the tab shows.
  constructor(session, draft) {
    this.session = session;
    this.draft = draft;
    this.current = ''; // the backtest followed
    this.timer = 0;
    this.built = false;
  }

  // show offers the backtest for the draft shown and, when the panel is
  // built for it, follows the newest backtest of this draft (running, or
  // the last finished).
  async show() {
    const d = this.draft();
    const out = $('draft-backtest-out');
    if (!out) return;
    if (!d.id || !d.mine || !backtestAccess(this.session)) {
      this.stop();
      out.hidden = true;
      return;
    }
    out.hidden = false;
    if (this.built && this.draftId === d.id) return;
    this.build(d.id);
    try {
      const list = await this.session.request('GET', base);
      const last = list.backtests.find((b) => b.draft === d.id);
      if (last) this.follow(last.id);
    } catch (e) {
      $('backtest-error').textContent = errorText(e);
    }
  }

  build(id) {
    this.stop();
    this.draftId = id;
    this.built = true;
    this.current = '';
    const kind = el('select', { id: 'backtest-range', name: 'kind', onchange: () => this.toggleRange() },
      el('option', { value: 'duration' }, 'the last'), el('option', { value: 'last' }, 'the last events of each partition'),
      el('option', { value: 'window' }, 'a window'));
    fill($('draft-backtest-out'),
      el('h2', {}, 'Backtest'),
      el('p', { class: 'hint' }, 'Runs the draft and the active tree over recorded events, on an engine, outside its consumer group; no action runs.'),
      el('form', { id: 'backtest-form', class: 'toolbar', onsubmit: (e) => { e.preventDefault(); this.start(); } },
        el('label', {}, 'Over ', kind),
        el('label', { 'data-range': 'duration' }, el('input', { name: 'duration', value: '1h', size: 6, 'aria-label': 'duration' })),
        el('label', { 'data-range': 'last', hidden: true }, el('input', { name: 'last', type: 'number', min: 1, value: 1000, 'aria-label': 'events per partition' })),
        el('label', { 'data-range': 'window', hidden: true }, 'from ', el('input', { name: 'from', type: 'datetime-local', step: 1 })),
        el('label', { 'data-range': 'window', hidden: true }, 'to ', el('input', { name: 'to', type: 'datetime-local', step: 1 })),
        el('label', {}, 'Differing events kept ', el('input', { name: 'sample', type: 'number', min: 0, max: 100, value: 20, size: 4 })),
        el('button', { id: 'backtest-run', type: 'submit' }, 'Run backtest'),
        el('button', { id: 'backtest-cancel', type: 'button', hidden: true, onclick: () => this.cancel() }, 'Cancel')),
      el('p', { id: 'backtest-error', class: 'error', role: 'alert' }),
      el('div', { id: 'backtest-state', 'aria-live': 'polite' },
        el('progress', { id: 'backtest-progress', max: 1, value: 0, hidden: true }),
        el('span', { id: 'backtest-progress-text' })),
      el('div', { id: 'backtest-result' }));
  }

  toggleRange() {
    const kind = $('backtest-range').value;
    for (const l of document.querySelectorAll('#backtest-form [data-range]')) l.hidden = l.dataset.range !== kind;
  }

  async start() {
    const f = $('backtest-form').elements;
    $('backtest-error').textContent = '';
    let req;
    try {
      req = { draft: this.draftId, ...rangeOf(f.kind.value, { duration: f.duration.value, last: f.last.value, from: f.from.value, to: f.to.value }) };
    } catch (e) {
      $('backtest-error').textContent = e.message;
      return;
    }
    const sample = Number(f.sample.value);
    req.sample = sample > 0 ? sample : -1;
    try {
      const b = await this.session.request('POST', base, req);
      fill($('backtest-result'));
      this.follow(b.id);
    } catch (e) {
      $('backtest-error').textContent = errorText(e) + (e.params && e.params.FIELD ? ` (${e.params.FIELD})` : '');
    }
  }

  async cancel() {
    if (!this.current) return;
    try {
      await this.session.request('POST', `${base}/${encodeURIComponent(this.current)}/cancel`);
    } catch (e) {
      $('backtest-error').textContent = errorText(e);
    }
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = 0;
  }

  // follow reads the backtest until it is finished, then shows its
  // result.
  async follow(id) {
    this.stop();
    this.current = id;
    let b;
    try {
      b = await this.session.request('GET', `${base}/${encodeURIComponent(id)}`);
    } catch (e) {
      $('backtest-error').textContent = errorText(e);
      this.current = '';
      this.running(false);
      return;
    }
    if (this.current !== id || !$('backtest-state')) return;
    this.progress(b);
    if (!finished(b.state)) {
      this.running(true);
      this.timer = setTimeout(() => this.follow(id), poll);
      return;
    }
    this.running(false);
    this.current = '';
    this.result(b);
  }

  running(on) {
    $('backtest-run').disabled = on;
    $('backtest-cancel').hidden = !on;
  }

  progress(b) {
    const bar = $('backtest-progress');
    const p = b.progress;
    let text;
    if (b.state === 'pending') text = 'Waiting for an engine…';
    else if (!p) text = b.state;
    else {
      bar.max = Math.max(p.total, 1);
      bar.value = p.read;
      const pct = p.total ? ` (${Math.floor((p.read * 100) / p.total)}%)` : '';
      text = `${num(p.read)} of ${num(p.total)} events${pct}, ${num(Math.round(p.rate))} events/s on ${b.engine}`;
      if (p.held) text += ' — held: the live pipeline lags';
      if (b.cancel_requested) text += ' — cancelling';
    }
    bar.hidden = !p;
    bar.dataset.state = b.state;
    $('backtest-progress-text').textContent = `Backtest ${b.id}: ${text}`;
  }

  result(b) {
    const r = b.result;
    const head = el('p', { id: 'backtest-summary', 'data-state': b.state },
      `Backtest ${b.id} ${b.state}`, b.engine ? ` on ${b.engine}` : '', b.error ? `: ${b.error}` : '', '.');
    if (!r) { fill($('backtest-result'), head); return; }
    const differing = new Set(r.differing_rules || []);
    const rows = [...r.rules].sort((x, y) => Number(differing.has(y.rule)) - Number(differing.has(x.rule)));
    const cell = (rc, side) => (rc.only && rc.only !== side ? '—' : num(rc[side]));
    fill($('backtest-result'), head,
      el('p', {}, `${num(r.events)} events read${r.truncated ? ` (the range holds ${num(r.range_events)}: the latest were kept)` : ''}${r.complete ? '' : ' (stopped before the end of the range)'}, `
        + `${num(r.differing_events)} with a different outcome; ${differing.size} rule${differing.size === 1 ? '' : 's'} whose counts differ.`),
      el('table', { id: 'backtest-rules' },
        el('thead', {}, el('tr', {}, ['Rule', 'Active', 'Draft', 'Change'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, rows.map((rc) => el('tr', { 'data-rule': rc.rule, 'data-differs': differing.has(rc.rule) ? 'true' : null },
          el('td', { class: 'mono' }, rc.rule), el('td', { 'data-side': 'active' }, cell(rc, 'active')),
          el('td', { 'data-side': 'draft' }, cell(rc, 'candidate')),
          el('td', {}, differing.has(rc.rule) ? `${rc.candidate - rc.active > 0 ? '+' : ''}${num(rc.candidate - rc.active)}` : ''))))),
      (r.samples || []).length ? el('h3', {}, `Differing events (${r.samples.length} of ${num(r.differing_events)})`) : null,
      (r.samples || []).map((s) => el('details', { class: 'backtest-sample', 'data-offset': `${s.partition}/${s.offset}` },
        el('summary', {}, `Partition ${s.partition}, offset ${s.offset}${s.event_id ? `, event ${s.event_id}` : ''}`),
        el('table', {}, el('tbody', {},
          el('tr', {}, el('th', { scope: 'row' }, 'Active'), el('td', { class: 'mono' }, (s.active.matched || []).join(', ') || 'no rule matched')),
          el('tr', {}, el('th', { scope: 'row' }, 'Draft'), el('td', { class: 'mono' }, (s.candidate.matched || []).join(', ') || 'no rule matched')))),
        s.event ? el('pre', {}, pretty(s.event)) : el('p', { class: 'hint' }, `The event (${num(s.event_bytes)} bytes) is too large to keep.`))));
  }
}
