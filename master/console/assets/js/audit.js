// Audit log: the changes of the replicated state, newest first, from GET
// /squall/v1/audit (admin on the root), filtered by user, action and
// time, paged with next_before.
import { el, fill, $ } from './dom.js';

const base = '/squall/v1/audit';

// auditAccess says whether the token may read the audit log: admin on
// an authorization at the root (the server decides in the end).
export function auditAccess(claims) {
  return Object.values((claims && claims.auths) || {}).some((a) => {
    const p = a.path || [];
    return p.length === 1 && p[0] === 'root' && (a.roles || []).includes('admin');
  });
}

const when = (ms) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
const errorText = (e) => `${e.code ? e.code + ': ' : ''}${e.message}`;

export class AuditLog {
  constructor(session) {
    this.session = session;
    this.befores = [0];
    $('audit-form').addEventListener('submit', (e) => { e.preventDefault(); this.befores = [0]; this.load(); });
    $('audit-next').addEventListener('click', () => { this.befores.push(this.next); this.load(); });
    $('audit-prev').addEventListener('click', () => { this.befores.pop(); this.load(); });
  }

  query() {
    const f = $('audit-form').elements;
    const q = new URLSearchParams({ limit: '50' });
    for (const k of ['user', 'action']) if (f[k].value.trim()) q.set(k, f[k].value.trim());
    if (f.since.value.trim()) {
      const t = new Date(f.since.value.trim());
      if (!Number.isNaN(t.getTime())) q.set('since', t.toISOString().replace(/\.\d{3}Z$/, 'Z'));
    }
    const b = this.befores[this.befores.length - 1];
    if (b) q.set('before', String(b));
    return q;
  }

  async load() {
    $('audit-error').textContent = '';
    const body = $('audit-table').tBodies[0];
    try {
      const p = await this.session.request('GET', `${base}?${this.query()}`);
      this.next = p.next_before || 0;
      fill(body, p.records.map((r) => el('tr', { 'data-seq': String(r.seq), 'data-action': r.action },
        el('td', {}, String(r.seq)), el('td', {}, when(r.time_ms)), el('td', {}, r.user || '(cluster)'),
        el('td', {}, r.authorization || '—'), el('td', { class: 'mono' }, r.action),
        el('td', { class: 'mono' }, [r.target, r.detail].filter(Boolean).join(' — ') || '—'),
        el('td', { 'data-result': r.result }, r.result + (r.code ? ` (${r.code})` : '')),
        el('td', { class: 'mono', title: r.request_id || '' }, (r.request_id || '—').slice(0, 12)))));
      if (!p.records.length) body.append(el('tr', {}, el('td', { colspan: 8, class: 'hint' }, 'No record matches.')));
      $('audit-prev').disabled = this.befores.length <= 1;
      $('audit-next').disabled = !this.next;
    } catch (e) {
      fill(body);
      $('audit-error').textContent = errorText(e);
    }
  }
}
