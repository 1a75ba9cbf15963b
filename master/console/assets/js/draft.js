// The draft: create or take over, edit nodes and rules in forms (with the
// JSON that is sent), reorder rules, import and export, the diff against
// the active tree, and deploy after a confirmation showing that diff.
import { el, fill, $, pretty, status } from './dom.js';
import { nodePath } from './api.js';
import { fromExport, render, find, keyOf } from './tree.js';
import { renderTreeDiff } from './treediff.js';
import { resolve } from './router.js';
import { ruleEditor } from './ruleform.js';
import { DraftTests } from './drafttests.js';

const cfg = '/api/v2_beta/config';

// fieldOf names the form field an API error message is about: the
// messages name fields as "name: …", "constraint.WHERE.first: …".
export function fieldOf(err) {
  if (err.params && err.params.RULE_NAME) return 'name';
  if (err.params && err.params.NODE_NAME) return 'name';
  const m = /(?:^|, )(name|description|continue|active|constraint\.WHERE|constraint\.WITH|constraint|actions|filter|target)(?:[.\[][^:]*)?:/.exec(err.message || '');
  if (!m) return '';
  return { 'constraint.WHERE': 'where', 'constraint.WITH': 'with', constraint: 'where' }[m[1]] || m[1];
}

// fieldOfPath names the form field of a params.FIELD path in the JSON
// view of a rule or node.
function fieldOfPath(path) {
  const m = /^(name|description|continue|active|constraint\.WHERE|constraint\.WITH|constraint|actions|filter|target)(?:$|[.[])/.exec(path || '');
  if (!m) return '';
  return { 'constraint.WHERE': 'where', 'constraint.WITH': 'with', constraint: 'where' }[m[1]] || m[1];
}

export class Draft {
  // navigate(item, params) moves to a place in the draft (a new address);
  // place(item, params) records the place shown (router.js).
  constructor(session, { onChange, navigate = null, place = null }) {
    this.session = session;
    this.onChange = onChange;
    this.navigate = navigate;
    this.place = place;
    this.diffShown = false;
    this.id = '';
    this.owner = '';
    this.root = null;
    this.selected = '';
    this.tests = new DraftTests(session);
    $('draft-create').addEventListener('click', () => this.create());
    $('draft-takeover').addEventListener('click', () => this.takeOver());
    $('draft-diff').addEventListener('click', () => this.showDiff());
    $('draft-deploy').addEventListener('click', () => this.confirmDeploy());
    $('draft-export').addEventListener('click', () => this.exportFile());
    $('draft-import').addEventListener('change', (e) => this.importFile(e.target));
    $('deploy-dialog').addEventListener('close', () => { if ($('deploy-dialog').returnValue === 'deploy') this.deploy(); });
  }

  get auth() { return this.session.auth(); }

  // show shows the place a route names: the draft (read again when the tab
  // is entered), the node or rule its path names, and with ?diff=1 the
  // diff with the active tree.
  async show(r, entering, prefix) {
    if (entering || !this.root) await this.load();
    if (!this.root) return;
    const item = resolve(this.root, prefix, r.path);
    if (item) this.select(item, false);
    else {
      this.selected = '';
      this.draw();
      fill($('draft-editor'), r.path.length
        ? el('p', { class: 'error' }, `Nothing is at ${r.path.join(' › ')} in the draft.`)
        : el('p', { class: 'hint' }, 'Select a rule or node to edit it.'));
    }
    if (r.params.get('diff')) await this.showDiff(false);
    else { $('draft-diff-out').hidden = true; this.diffShown = false; }
  }

  params() { return { diff: this.diffShown ? '1' : '' }; }
  get base() { return this.auth.path[this.auth.path.length - 1]; }

  // load reads the draft's id, owner and tree.
  async load() {
    const a = this.auth;
    fill($('draft-tree'), el('p', { class: 'hint' }, 'Loading…'));
    const ids = await this.session.request('GET', `${cfg}/drafts/${a.name}`);
    this.id = ids[0] || '';
    const info = this.id ? await this.session.request('GET', '/squall/v1/draft').catch(() => null) : null;
    this.owner = info ? info.owner : '';
    const me = this.session.claims().user;
    const mine = this.owner === me;
    fill($('draft-info'), this.id ? `Draft ${this.id}, owned by ${this.owner || 'unknown'}${mine ? ' (you)' : ''}.` : 'There is no draft.');
    $('draft-takeover').hidden = !this.id || mine || !this.session.can('edit');
    for (const id of ['draft-diff', 'draft-deploy', 'draft-export']) $(id).hidden = !this.id || (id === 'draft-deploy' && (!mine || !this.session.can('edit')));
    $('draft-import').closest('label').hidden = !this.id || !mine || !this.session.can('edit');
    this.editable = mine && this.session.can('edit');
    await this.tests.load(this.id);
    if (!this.id) {
      this.root = null;
      fill($('draft-tree'), el('p', { class: 'hint' }, 'Create a draft to edit the tree.'));
      return null;
    }
    let doc;
    try {
      doc = await this.session.request('GET', `${cfg}/draft/tree/export/${a.name}/${this.id}/${nodePath([this.base])}`);
    } catch (e) {
      // A takeover displaced this user: even reads are refused until
      // they take the draft over again or create one (decision 8).
      if (e.code !== 'NOT_OWNER') throw e;
      this.root = null;
      fill($('draft-tree'), el('p', { class: 'hint' }, `${this.owner || 'Another user'} took this draft over from you: take it over again, or create a new draft, to see it.`));
      return null;
    }
    this.root = fromExport(doc, []);
    this.draw();
    return this.root;
  }

  draw() {
    render($('draft-tree'), this.root, { onSelect: (item) => (this.navigate ? this.navigate(item, this.params()) : this.select(item)), selected: this.selected });
  }

  async run(what, fn) {
    try {
      await fn();
    } catch (e) {
      status(`${what}: ${e.code ? e.code + ': ' : ''}${e.message}`);
      return false;
    }
    return true;
  }

  async create() {
    if (this.id && !confirm('Replace the current draft with a copy of the active tree?')) return;
    await this.run('New draft', async () => {
      const d = await this.session.request('POST', `${cfg}/drafts/${this.auth.name}`);
      status(`Draft ${d.id} created.`);
      await this.load();
      this.onChange();
    });
  }

  async takeOver() {
    await this.run('Take over', async () => {
      await this.session.request('POST', `${cfg}/drafts/${this.auth.name}/${this.id}/takeover`);
      status('The draft is yours.');
      await this.load();
    });
  }

  async texts() {
    const a = this.auth;
    const p = nodePath([this.base]);
    const [active, draft] = await Promise.all([
      this.session.request('GET', `${cfg}/active/tree/export/${a.name}/${p}`, undefined, { raw: true }),
      this.session.request('GET', `${cfg}/draft/tree/export/${a.name}/${this.id}/${p}`, undefined, { raw: true }),
    ]);
    const norm = (t) => pretty(JSON.parse(t));
    return [norm(active), norm(draft)];
  }

  // showDiff shows what the draft changes: a summary, the changes node by
  // node, and the JSON line diff one click away (treediff.js).
  async showDiff(record = true) {
    await this.run('Diff', async () => {
      const [a, d] = await this.texts();
      const out = $('draft-diff-out');
      out.hidden = false;
      this.diffShown = true;
      const sum = renderTreeDiff(out, a, d);
      status(sum.total ? `Against the active tree: ${sum.text}.` : 'The draft is the same as the active tree.');
      if (record && this.place) this.place(this.root && find(this.root, this.selected), this.params());
    });
  }

  async confirmDeploy() {
    await this.run('Deploy', async () => {
      const [a, d] = await this.texts();
      renderTreeDiff($('deploy-diff'), a, d);
      $('deploy-dialog').returnValue = '';
      $('deploy-dialog').showModal();
    });
  }

  async deploy() {
    await this.run('Deploy', async () => {
      try {
        await this.session.request('POST', `${cfg}/drafts/${this.auth.name}/${this.id}/deploy`);
      } catch (e) {
        // The tests' failures go to their table; the status says why.
        if (e.code === 'TESTS_FAILED') this.tests.show(e.details);
        throw e;
      }
      status('Deployed: the draft is the active tree.');
      $('draft-diff-out').hidden = true;
      this.diffShown = false;
      if (this.place) this.place(this.root && find(this.root, this.selected), this.params());
      this.onChange();
    });
  }

  async exportFile() {
    await this.run('Export', async () => {
      const text = await this.session.request('GET', `${cfg}/draft/tree/export/${this.auth.name}/${this.id}/${nodePath([this.base])}`, undefined, { raw: true });
      const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
      const a = el('a', { href: url, download: `squall-draft-${this.base}.json` });
      document.body.append(a);
      a.click();
      a.remove();
      URL.revokeObjectURL(url);
    });
  }

  async importFile(input) {
    const file = input.files[0];
    if (!file) return;
    if (!confirm(`Replace ${this.base} and everything below it in the draft with ${file.name}?`)) { input.value = ''; return; }
    await this.run('Import', async () => {
      const form = new FormData();
      form.append('file', file);
      await this.session.request('PUT', `${cfg}/draft/tree/import/${this.auth.name}/${this.id}/${nodePath([this.base])}`, form);
      status(`Imported ${file.name}.`);
      await this.load();
    });
    input.value = '';
  }

  // select opens the item's editor; record tells it to record the place
  // (false when a route asked for it).
  select(item, record = true) {
    this.selected = keyOf(item);
    this.draw();
    const out = $('draft-editor');
    if (item.kind === 'Rule') fill(out, this.ruleForm(item));
    else fill(out, this.nodeForm(item));
    if (record && this.place) this.place(item, this.params());
  }

  // form builds an editor: fields [{name, label, type, value}] (type
  // 'section': {name, label, element}, a part whose values body reads
  // itself), body(v) the JSON sent, save(body) the request. hooks:
  // showError(path, message) puts an error of a field path (the server's
  // params.FIELD) at its input, true when it did; clear() clears them;
  // onRefresh(fn) receives the function that redraws the JSON view.
  form(title, fields, body, save, extra = [], hooks = {}) {
    const ro = !this.editable;
    const inputs = {};
    const errors = {};
    const preview = el('pre', { class: 'json-view' });
    const values = () => Object.fromEntries(fields.filter((f) => f.type !== 'section').map((f) => [f.name, f.type === 'checkbox' ? inputs[f.name].checked : inputs[f.name].value]));
    const refresh = () => {
      try { preview.textContent = pretty(body(values())); } catch (e) { preview.textContent = `(not valid JSON yet: ${e.message})`; }
    };
    const rows = fields.map((f) => {
      if (f.type === 'section') return el('fieldset', { class: 'section', 'data-field': f.name }, el('legend', {}, f.label), f.element);
      const id = `edit-${f.name}`;
      const input = f.type === 'json'
        ? el('textarea', { id, name: f.name, rows: f.rows || 6, spellcheck: 'false', readonly: ro, 'aria-describedby': id + '-error', oninput: refresh }, f.value)
        : el('input', { id, name: f.name, type: f.type, value: f.type === 'checkbox' ? null : f.value, checked: f.type === 'checkbox' && f.value, disabled: ro && f.type === 'checkbox', readonly: ro, 'aria-describedby': id + '-error', oninput: refresh, onchange: refresh });
      inputs[f.name] = input;
      errors[f.name] = el('p', { id: id + '-error', class: 'error', role: 'alert' });
      return el('div', { class: 'field', 'data-field': f.name }, el('label', { for: id }, f.label), input, errors[f.name]);
    });
    const general = el('p', { class: 'error', role: 'alert', id: 'edit-error' });
    const submit = el('form', { 'aria-label': title }, rows,
      el('details', {}, el('summary', {}, 'JSON view'), preview), general,
      ro ? el('p', { class: 'hint' }, 'Read only: only the draft\'s owner with the edit role changes it.') : el('div', { class: 'actions' }, extra, el('button', { type: 'submit' }, 'Save')));
    submit.currentBody = () => body(values());
    submit.addEventListener('submit', async (e) => {
      e.preventDefault();
      for (const f of fields) if (errors[f.name]) { errors[f.name].textContent = ''; errors[f.name].parentElement.classList.remove('invalid'); }
      if (hooks.clear) hooks.clear();
      general.textContent = '';
      let b;
      try { b = body(values()); } catch (ex) {
        if (!(ex.path && hooks.showError && hooks.showError(ex.path, ex.message))) general.textContent = ex.message;
        return;
      }
      try {
        await save(b);
      } catch (ex) {
        const msg = `${ex.code ? ex.code + ': ' : ''}${ex.message}`;
        const path = ex.params && ex.params.FIELD;
        if (path && hooks.showError && hooks.showError(path, msg)) return;
        const f = ex.field || fieldOfPath(path) || fieldOf(ex);
        if (f && errors[f]) {
          errors[f].textContent = msg;
          errors[f].parentElement.classList.add('invalid');
          inputs[f].focus();
        } else general.textContent = msg;
      }
    });
    refresh();
    if (hooks.onRefresh) hooks.onRefresh(refresh);
    return [el('h2', {}, title), submit];
  }

  // ruleForm edits a rule: its WHERE, WITH and actions in the form of
  // ruleform.js, or as JSON (this.ruleJSON); a button switches, keeping
  // what was typed.
  ruleForm(rule, isNew = false) {
    const a = this.auth;
    const c = rule.constraint || {};
    const json = (name, text) => {
      try { return JSON.parse(text); } catch (e) { const err = new Error(`${name}: not valid JSON: ${e.message}`); err.field = name; throw err; }
    };
    const fields = [
      { name: 'name', label: 'Name', type: 'text', value: rule.name },
      { name: 'description', label: 'Description', type: 'text', value: rule.description || '' },
      { name: 'active', label: 'Active', type: 'checkbox', value: rule.active },
      { name: 'continue', label: 'Continue with the next rules after a match', type: 'checkbox', value: rule.continue },
    ];
    let body;
    const hooks = {};
    if (this.ruleJSON) {
      fields.push(
        { name: 'where', label: 'Where (condition)', type: 'json', value: pretty(c.WHERE ?? null) },
        { name: 'with', label: 'With (extracted variables)', type: 'json', value: pretty(c.WITH || {}) },
        { name: 'actions', label: 'Actions', type: 'json', value: pretty(rule.actions || []), rows: 8 });
      body = (v) => ({ name: v.name, description: v.description, continue: v.continue, active: v.active,
        constraint: { WHERE: json('where', v.where), WITH: json('with', v.with) }, actions: json('actions', v.actions) });
    } else {
      let refresh = () => {};
      const ed = ruleEditor(rule, { readOnly: !this.editable, onInput: () => refresh() });
      fields.push(
        { name: 'where', label: 'Where (condition)', type: 'section', element: ed.where },
        { name: 'with', label: 'With (extracted variables)', type: 'section', element: ed.with },
        { name: 'actions', label: 'Actions', type: 'section', element: ed.actions });
      body = (v) => ({ name: v.name, description: v.description, continue: v.continue, active: v.active, ...ed.value() });
      Object.assign(hooks, { showError: ed.showError, clear: ed.clear, onRefresh: (fn) => { refresh = fn; } });
    }
    let built;
    const toggle = el('button', { type: 'button', class: 'mode', onclick: () => {
      let cur = null;
      try { cur = built[1].currentBody(); } catch { cur = null; }
      this.ruleJSON = !this.ruleJSON;
      fill($('draft-editor'), this.ruleForm(cur ? { ...rule, ...cur, stored: rule.stored || rule } : rule, isNew));
    } }, this.ruleJSON ? 'Edit in the form' : 'Edit as JSON');
    // orig is the rule's name in the draft (its URL), whatever is typed.
    const orig = (rule.stored || rule).name;
    const rs = nodePath(rule.path);
    const save = async (b) => {
      if (isNew) await this.session.request('POST', `${cfg}/draft/rule/details/${a.name}/${this.id}/${rs}`, b);
      else await this.session.request('PUT', `${cfg}/draft/rule/details/${a.name}/${this.id}/${rs}/${encodeURIComponent(orig)}`, b);
      status(`Rule ${b.name} ${isNew ? 'added' : 'saved'}.`);
      this.selected = keyOf({ ...rule, name: b.name });
      await this.reselect();
    };
    const ruleset = find(this.root, rule.path.join(','));
    const idx = ruleset ? ruleset.rules.findIndex((r) => r.name === orig) : -1;
    const move = (d) => async () => {
      await this.run('Move', async () => {
        await this.session.request('PUT', `${cfg}/draft/rule/move/${a.name}/${this.id}/${rs}/${encodeURIComponent(orig)}`, { position: idx + d });
        status(`Rule ${orig} moved to position ${idx + d}.`);
        await this.reselect();
      });
    };
    if (isNew) return (built = this.form(`New rule in ${rule.path[rule.path.length - 1]}`, fields, body, save, [toggle], hooks));
    const extra = [
      toggle,
      el('button', { type: 'button', disabled: idx <= 0, onclick: move(-1) }, 'Move up'),
      el('button', { type: 'button', disabled: !ruleset || idx >= ruleset.rules.length - 1, onclick: move(1) }, 'Move down'),
      this.deleteButton(`rule ${orig}`, `${cfg}/draft/rule/details/${a.name}/${this.id}/${rs}/${encodeURIComponent(orig)}`, rule.path.join(',')),
    ];
    return (built = this.form(`Rule ${orig}`, fields, body, save, extra, hooks));
  }

  // deleteButton deletes what url names after a confirmation, then
  // selects parentKey.
  deleteButton(what, url, parentKey) {
    return el('button', { type: 'button', class: 'danger', onclick: async () => {
      if (!confirm(`Delete ${what} from the draft?`)) return;
      await this.run('Delete', async () => {
        await this.session.request('DELETE', url);
        status(`Deleted ${what}.`);
        this.selected = parentKey;
        await this.reselect();
      });
    } }, 'Delete');
  }

  // newNode opens the form of a new child of parent.
  newNode(parent, kind) {
    const blank = { kind, name: '', path: [...parent.path, ''], description: '', active: true, filter: null, target: '${event.payload.items}', nodes: [], rules: [] };
    fill($('draft-editor'), this.nodeForm(blank, parent));
  }

  newRule(ruleset) {
    const blank = { kind: 'Rule', name: '', description: '', active: true, continue: true, path: ruleset.path, constraint: { WHERE: null, WITH: {} }, actions: [] };
    fill($('draft-editor'), this.ruleForm(blank, true));
  }

  nodeForm(node, newIn = null) {
    const a = this.auth;
    const fields = [{ name: 'name', label: 'Name', type: 'text', value: node.name }];
    if (node.kind !== 'Ruleset') {
      fields.push({ name: 'description', label: 'Description', type: 'text', value: node.description },
        { name: 'active', label: 'Active', type: 'checkbox', value: node.active });
    }
    if (node.kind === 'Filter') fields.push({ name: 'filter', label: 'Filter (condition)', type: 'json', value: pretty(node.filter) });
    if (node.kind === 'Iterator') fields.push({ name: 'target', label: 'Target', type: 'text', value: node.target });
    const body = (v) => {
      const b = { type: node.kind, name: v.name };
      if (node.kind !== 'Ruleset') Object.assign(b, { description: v.description, active: v.active });
      if (node.kind === 'Filter') {
        try { b.filter = JSON.parse(v.filter); } catch (e) { const err = new Error(`filter: not valid JSON: ${e.message}`); err.field = 'filter'; throw err; }
      }
      if (node.kind === 'Iterator') b.target = v.target;
      return b;
    };
    const save = async (b) => {
      if (newIn) await this.session.request('POST', `${cfg}/draft/tree/details/${a.name}/${this.id}/${nodePath(newIn.path)}`, b);
      else await this.session.request('PUT', `${cfg}/draft/tree/details/${a.name}/${this.id}/${nodePath(node.path)}`, b);
      status(`${node.kind} ${b.name} ${newIn ? 'added' : 'saved'}.`);
      this.selected = keyOf({ ...node, path: [...node.path.slice(0, -1), b.name] });
      await this.reselect();
    };
    if (newIn) return this.form(`New ${node.kind.toLowerCase()} in ${newIn.name}`, fields, body, save);
    const extra = [];
    if (node.kind === 'Ruleset') extra.push(el('button', { type: 'button', onclick: () => this.newRule(node) }, 'Add rule'));
    else for (const k of ['Filter', 'Iterator', 'Ruleset']) extra.push(el('button', { type: 'button', onclick: () => this.newNode(node, k) }, `Add ${k.toLowerCase()}`));
    if (node.path.length > 1) extra.push(this.deleteButton(`${node.kind.toLowerCase()} ${node.name} and everything below it`, `${cfg}/draft/tree/details/${a.name}/${this.id}/${nodePath(node.path)}`, node.path.slice(0, -1).join(',')));
    return this.form(`${node.kind} ${node.name}`, fields, body, save, extra);
  }

  async reselect() {
    await this.load();
    const item = this.root && find(this.root, this.selected);
    if (item) this.select(item);
    this.onChange();
  }
}
