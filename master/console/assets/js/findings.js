// Findings: the list with the API's filters and paging, a finding's
// details (its password hidden until asked for) and its triage (PATCH).
// The filters, the page and the finding shown are the route's
// (#/findings/UID?state=…&page=2): a search, a page or a finding opened
// goes through navigate.
import { el, fill, $, pretty, status } from './dom.js';

const base = '/intel/api/sdk/v0';
export const states = ['Unassigned', 'Acknowledged', 'InProgress', 'Resolved', 'FalsePositive', 'Ignored'];
const priorities = ['Low', 'Medium', 'High', 'Critical'];
const severities = ['Info', 'Low', 'Medium', 'High', 'Critical'];

const filters = ['state', 'tool', 'monitored_domain', 'username', 'from', 'to', 'limit'];

export class Findings {
  constructor(session, { navigate = null } = {}) {
    this.session = session;
    this.navigate = navigate;
    this.page = 1;
    this.total = 0;
    this.uid = '';
    const form = $('findings-form');
    const sel = form.elements.state;
    for (const s of states) sel.append(el('option', {}, s));
    const go = (page, uid = '') => {
      if (this.navigate) this.navigate({ ...this.filterValues(), page: page > 1 ? page : '' }, uid);
      else { this.page = page; this.load(); if (uid) this.detail(uid); }
    };
    this.go = go;
    form.addEventListener('submit', (e) => { e.preventDefault(); go(1); });
    $('findings-prev').addEventListener('click', () => go(this.page - 1));
    $('findings-next').addEventListener('click', () => go(this.page + 1));
  }

  // filterValues are the form's filters as typed ("" for none).
  filterValues() {
    const f = $('findings-form').elements;
    return Object.fromEntries(filters.map((k) => [k, k === 'limit' && f.limit.value === '25' ? '' : f[k].value.trim()]));
  }

  // show shows the route's list and finding: the filters and page from
  // its query, the finding its path names.
  async show(r) {
    const f = $('findings-form').elements;
    for (const k of filters) f[k].value = r.params.get(k) || (k === 'limit' ? '25' : '');
    this.page = Math.max(1, parseInt(r.params.get('page'), 10) || 1);
    await this.load();
    this.uid = r.path[0] || '';
    if (this.uid) await this.detail(this.uid);
    else fill($('finding-details'));
  }

  query() {
    const f = $('findings-form').elements;
    const q = new URLSearchParams({ page: String(this.page), limit: f.limit.value });
    for (const k of ['state', 'tool', 'monitored_domain', 'username']) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    for (const k of ['from', 'to']) if (f[k].value) q.set(k, String(Math.floor(new Date(f[k].value).getTime() / 1000)));
    return q;
  }

  async load() {
    $('findings-error').textContent = '';
    const body = $('findings-table').tBodies[0];
    // Nothing to page through until the answer says otherwise.
    $('findings-prev').disabled = true;
    $('findings-next').disabled = true;
    try {
      const ans = await this.session.request('GET', `${base}/findings/credential?${this.query()}`);
      this.total = ans.total;
      this.limit = ans.limit;
      fill(body, ans.findings.map((f) => el('tr', { tabindex: 0, 'data-uid': f.uid,
        'aria-selected': String(f.uid === this.uid),
        onclick: () => this.go(this.page, f.uid), onkeydown: (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.go(this.page, f.uid); } } },
      el('td', {}, new Date(f.discovery_date * 1000).toISOString().replace('T', ' ').slice(0, 19)),
      el('td', {}, f.tool && f.tool.name), el('td', {}, f.monitored_domain && f.monitored_domain.id),
      el('td', {}, f.username), el('td', { class: 'mono' }, f.resource), el('td', { 'data-state': f.state }, f.state))));
      if (!ans.findings.length) body.append(el('tr', {}, el('td', { colspan: 6, class: 'hint' }, 'No finding matches.')));
      const pages = Math.max(1, Math.ceil(ans.total / ans.limit));
      $('findings-page').textContent = ans.total ? `page ${ans.page} of ${pages} (${ans.total} finding${ans.total === 1 ? '' : 's'})` : 'no finding';
      $('findings-prev').disabled = !ans.total || ans.page <= 1;
      $('findings-next').disabled = !ans.total || ans.page >= pages;
    } catch (e) {
      fill(body);
      $('findings-page').textContent = '';
      $('findings-error').textContent = `${e.code ? e.code + ': ' : ''}${e.message}`;
    }
  }

  // detail shows a finding and its triage.
  async detail(uid) {
    const out = $('finding-details');
    try {
      const ans = await this.session.request('GET', `${base}/finding/${encodeURIComponent(uid)}`);
      const f = ans.findings[0];
      const masked = { ...f, plain_text: f.plain_text ? '••••••' : '' };
      const pre = el('pre', {}, pretty(masked));
      const select = (name, values, cur, nullable) => el('label', {}, name + ' ',
        el('select', { name }, nullable ? el('option', { value: '' }, '(none)') : null,
          values.map((v) => el('option', { selected: v === cur }, v))));
      const form = el('form', { class: 'toolbar', 'aria-label': 'triage' },
        select('state', states, f.state, false), select('priority', priorities, f.priority, true),
        select('severity', severities, f.severity, true),
        el('label', {}, 'ticket ', el('input', { name: 'ticket', value: f.ticket || '', size: 12 })),
        el('button', { type: 'submit' }, 'Save'));
      const err = el('p', { class: 'error', role: 'alert' });
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        const v = form.elements;
        const patch = { state: v.state.value, priority: v.priority.value || null, severity: v.severity.value || null, ticket: v.ticket.value || null };
        try {
          await this.session.request('PATCH', `${base}/finding/${encodeURIComponent(uid)}`, patch);
          status(`Finding ${uid} saved: ${patch.state}.`);
          await this.load();
          await this.detail(uid);
        } catch (ex) { err.textContent = `${ex.code ? ex.code + ': ' : ''}${ex.message}`; }
      });
      fill(out, el('h2', {}, `Finding ${f.uid}`), form, err,
        el('button', { type: 'button', onclick: (e) => { pre.textContent = pretty(f); e.target.remove(); } }, 'Show the password'), pre);
      for (const tr of $('findings-table').tBodies[0].rows) tr.setAttribute('aria-selected', String(tr.dataset.uid === uid));
    } catch (e) {
      fill(out, el('p', { class: 'error' }, `${e.code ? e.code + ': ' : ''}${e.message}`));
    }
  }
}
