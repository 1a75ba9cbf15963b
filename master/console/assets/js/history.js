// History: the versions of the active tree (GET /squall/v1/tree/versions,
// newest first, paged with next_before), the diff of any two, node by
// node, and a rollback to a version after a confirmation naming what it
// changes. Addresses: #/history, #/history/N (version N against the
// active tree), #/history/N?from=M (what changes from M to N); ?page=P
// (P > 1) lists the P-th page of versions, so that a reload or back keeps
// it.
import { el, fill, $, status } from './dom.js';
import { renderTreeDiff } from './treediff.js';

const base = '/squall/v1/tree/versions';
const when = (ms) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
const errorText = (e) => `${e.code ? e.code + ': ' : ''}${e.message}`;
const label = (v) => (v ? `version ${v.number}` : 'the active tree');
// pageSize is how many versions a page lists; maxLimit the API's bound of
// one list.
const pageSize = 20;
const maxLimit = 1000;

export class VersionHistory {
  // nav.navigate(number, from, page) moves to a version's address.
  constructor(session, nav) {
    this.session = session;
    this.nav = nav;
    this.page = 1;
    this.shown = { n: '', from: '' };
    this.picked = [];
    $('history-next').addEventListener('click', () => this.nav.navigate(this.shown.n, this.shown.from, this.page + 1));
    $('history-prev').addEventListener('click', () => this.nav.navigate(this.shown.n, this.shown.from, this.page - 1));
    $('history-compare').addEventListener('click', () => {
      const [a, b] = [...this.picked].sort((x, y) => x - y);
      this.nav.navigate(b, a, this.page);
    });
    $('rollback-cancel').addEventListener('click', () => $('rollback-dialog').close());
    $('rollback-confirm').addEventListener('click', () => this.rollback(false));
    $('rollback-force').addEventListener('click', () => this.rollback(true));
  }

  q(extra = {}) {
    return new URLSearchParams({ auth: this.session.auth().name, ...extra }).toString();
  }

  // show lists the versions and, for #/history/N, shows N's diff.
  async show(r) {
    const n = /^\d+$/.test(r.path[0] || '') ? r.path[0] : '';
    const from = /^\d+$/.test(r.params.get('from') || '') ? r.params.get('from') : '';
    const page = /^\d+$/.test(r.params.get('page') || '') ? Number(r.params.get('page')) : 1;
    this.page = Math.max(page, 1);
    this.shown = { n, from };
    this.picked = n ? [Number(n), ...(from ? [Number(from)] : [])] : [];
    await this.list();
    if (n) await this.diff(from || 'active', n);
    else { fill($('history-diff')); $('history-diff').hidden = true; }
    if (this.notice) { status(this.notice); this.notice = ''; }
  }

  // cursor returns the before parameter of the page's list: the number
  // of the oldest version on the pages above it (0 for the first page;
  // null when the versions end before the page).
  async cursor(page) {
    let before = 0;
    for (let skip = (page - 1) * pageSize; skip > 0;) {
      const take = Math.min(skip, maxLimit);
      const p = await this.session.request('GET', `${base}?${this.q({ limit: String(take), ...(before ? { before: String(before) } : {}) })}`);
      if (!p.next_before) return null;
      before = p.next_before;
      skip -= take;
    }
    return before;
  }

  async list() {
    $('history-error').textContent = '';
    const body = $('history-table').tBodies[0];
    $('history-page').textContent = `page ${this.page}`;
    try {
      const b = await this.cursor(this.page);
      if (b === null) {
        fill(body, el('tr', {}, el('td', { colspan: 8, class: 'hint' }, `There is no page ${this.page}: the versions end before it.`)));
        $('history-prev').disabled = this.page <= 1;
        $('history-next').disabled = true;
        return;
      }
      const p = await this.session.request('GET', `${base}?${this.q({ limit: String(pageSize), ...(b ? { before: String(b) } : {}) })}`);
      this.next = p.next_before || 0;
      const edit = this.session.can('edit');
      fill(body, p.versions.map((v, i) => {
        const active = !b && i === 0;
        const box = el('input', { type: 'checkbox', 'aria-label': `select version ${v.number}`, checked: this.picked.includes(v.number) });
        box.addEventListener('change', () => {
          this.picked = box.checked ? [...this.picked.filter((x) => x !== v.number), v.number].slice(-2) : this.picked.filter((x) => x !== v.number);
          for (const c of body.querySelectorAll('input[type="checkbox"]')) c.checked = this.picked.includes(Number(c.closest('tr').dataset.version));
          this.pickedChanged();
        });
        return el('tr', { 'data-version': String(v.number), 'data-active': active ? 'true' : null, class: this.picked[0] === v.number ? 'selected' : null },
          el('td', {}, box),
          el('td', {}, el('a', { href: `#/history/${v.number}${this.page > 1 ? `?page=${this.page}` : ''}` }, String(v.number)), active ? el('span', { class: 'active-mark' }, 'active') : null),
          el('td', {}, when(v.time_ms)), el('td', {}, v.author || '—'),
          el('td', {}, [v.message, v.rollback_of ? `(rollback to ${v.rollback_of})` : ''].filter(Boolean).join(' ') || '—'),
          el('td', { class: 'num' }, String(v.nodes)), el('td', { class: 'num' }, String(v.rules)),
          el('td', {}, edit && !active ? el('button', { type: 'button', class: 'rollback', onclick: () => this.confirmRollback(v) }, 'Roll back…') : null));
      }));
      if (!p.versions.length) body.append(el('tr', {}, el('td', { colspan: 8, class: 'hint' }, 'No version yet: every deploy and every rollback records one.')));
      $('history-prev').disabled = this.page <= 1;
      $('history-next').disabled = !this.next;
      this.pickedChanged();
    } catch (e) {
      fill(body);
      $('history-error').textContent = errorText(e);
    }
  }

  pickedChanged() { $('history-compare').disabled = this.picked.length !== 2; }

  // load fetches what the API says changes from a to b, and both export
  // files for the node-by-node summary and groups.
  async load(a, b) {
    const raw = { raw: true };
    return Promise.all([
      this.session.request('GET', `${base}/${a}/diff/${b}?${this.q()}`),
      this.session.request('GET', `${base}/${a}?${this.q()}`, undefined, raw),
      this.session.request('GET', `${base}/${b}?${this.q()}`, undefined, raw),
    ]);
  }

  async diff(a, b) {
    const out = $('history-diff');
    out.hidden = false;
    try {
      const [d, ta, tb] = await this.load(a, b);
      const name = `From ${label(d.from)} to ${label(d.to)}`;
      const box = el('div', {});
      renderTreeDiff(box, ta, tb, { lead: name, same: `${name}: no change.` });
      fill(out, el('h2', {}, `${name} (${d.changes.length} node${d.changes.length === 1 ? '' : 's'} with a change)`), box);
      out.dataset.from = String(a);
      out.dataset.to = String(b);
    } catch (e) {
      fill(out, el('p', { class: 'error', role: 'alert' }, errorText(e)));
    }
  }

  // confirmRollback shows what a rollback to v changes (the active tree
  // against v's) and asks for an optional message.
  async confirmRollback(v) {
    this.target = v;
    $('rollback-error').textContent = '';
    $('rollback-force').hidden = true;
    $('rollback-message').value = '';
    $('rollback-title').textContent = `Roll back to version ${v.number}?`;
    try {
      const [, ta, tb] = await this.load('active', v.number);
      renderTreeDiff($('rollback-diff'), ta, tb, { lead: 'The active tree changes', same: `Version ${v.number}'s tree is the active tree: the rollback changes nothing but records a version.` });
      $('rollback-dialog').showModal();
    } catch (e) {
      status(errorText(e));
    }
  }

  async rollback(force) {
    const v = this.target;
    $('rollback-error').textContent = '';
    const q = { ...(force ? { force: 'true' } : {}) };
    const msg = $('rollback-message').value.trim();
    if (msg) q.message = msg;
    try {
      const ans = await this.session.request('POST', `${base}/${v.number}/rollback?${this.q(q)}`);
      $('rollback-dialog').close();
      // The list's address shows it; the status line is set once it is
      // shown (moving to a place clears the line).
      this.notice = `Rolled back to version ${v.number}: the active tree is version ${ans.version.number || '?'}.`;
      this.nav.navigate(null, '', 1);
    } catch (e) {
      if (e.status === 409 && e.code === 'DRAFT_EXISTS') {
        $('rollback-error').textContent = `A draft exists (${e.params.ID || '?'}, owned by ${e.params.OWNER || '?'}): the rollback is refused unless forced. Forcing it keeps the draft as it is, based on the tree before the rollback.`;
        $('rollback-force').hidden = false;
        return;
      }
      $('rollback-error').textContent = e.status === 403 ? `Refused: ${errorText(e)}` : errorText(e);
    }
  }
}
