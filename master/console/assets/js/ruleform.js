// A rule's WHERE, WITH and actions as a form: the condition as a tree of
// operators (AND, OR, NOT and the comparisons, each argument its own
// input), each extracted variable and each action on its own row. Every
// input carries the path of its field in the rule's JSON (data-path), the
// path the server names in an error's params.FIELD: showError puts the
// server's message under that input.
import { el, fill, pretty } from './dom.js';

export const operators = ['AND', 'OR', 'NOT', 'equals', 'ne', 'equalsIgnoreCase', 'contains', 'containsIgnoreCase', 'ge', 'gt', 'le', 'lt', 'regex'];

// idOf makes an element id of a field path.
const idOf = (path) => 'edit-' + path.replace(/[^A-Za-z0-9_]+/g, '-').replace(/-$/, '');

// argText shows an operator argument: a string as itself (an accessor or
// a text), any other value as JSON.
export const argText = (v) => (typeof v === 'string' ? v : JSON.stringify(v ?? null));

// argValue reads an argument back: JSON for a number, true, false, null,
// an object, an array or a "quoted string"; any other text is a string.
export function argValue(text) {
  const t = text.trim();
  if (/^(-?[0-9]|true$|false$|null$|[[{"])/.test(t)) {
    try { return JSON.parse(t); } catch { /* a string */ }
  }
  return text;
}

// blankOp is a new operator of type t.
function blankOp(t) {
  if (t === 'AND' || t === 'OR') return { type: t, operators: [{ type: 'equals', first: '', second: '' }] };
  if (t === 'NOT') return { type: t, operator: { type: 'equals', first: '', second: '' } };
  if (t === 'regex') return { type: t, regex: '', target: '' };
  return { type: t, first: '', second: '' };
}

// retype changes op's type in place, keeping its arguments when the new
// type takes the same ones (AND and OR; two comparisons), and the old
// condition inside a new AND, OR or NOT.
function retype(op, t) {
  const shape = (x) => (x === 'AND' || x === 'OR' ? 'list' : x === 'NOT' || x === 'regex' ? x : 'pair');
  if (shape(op.type) === shape(t)) { op.type = t; return; }
  const old = structuredClone(op);
  for (const k of Object.keys(op)) delete op[k];
  Object.assign(op, blankOp(t));
  // A condition made an AND, an OR or a NOT keeps the old one inside.
  if (t === 'AND' || t === 'OR') op.operators = [old];
  else if (t === 'NOT') op.operator = old;
}

// ruleEditor builds the editor of rule's constraint and actions. It
// returns {where, with, actions} (the sections' elements), value() (the
// rule's constraint and actions; it throws an error with a .path for a
// field that does not read), showError(path, message) (true when an input
// takes the error) and clear().
export function ruleEditor(rule, { readOnly = false, onInput = () => {} } = {}) {
  const c = rule.constraint || {};
  const model = {
    where: c.WHERE ? structuredClone(c.WHERE) : null,
    with: Object.entries(c.WITH || {}).map(([name, ex]) => ({ name, text: pretty(ex) })),
    actions: (rule.actions || []).map((a) => ({ id: a.id, text: pretty(a.payload ?? {}) })),
  };
  const inputs = new Map(); // field path -> {input, error}
  const whereBox = el('div', { class: 'op-root' });
  const withBox = el('div', { class: 'rows' });
  const actionsBox = el('div', { class: 'rows' });

  // field is a labelled input bound to a field path.
  const field = (path, label, input) => {
    input.id = idOf(path);
    input.dataset.path = path;
    input.setAttribute('aria-describedby', idOf(path) + '-error');
    if (readOnly) input.setAttribute(input.tagName === 'SELECT' ? 'disabled' : 'readonly', '');
    const error = el('p', { class: 'error', id: idOf(path) + '-error', role: 'alert' });
    inputs.set(path, { input, error });
    return el('div', { class: 'field sub', 'data-field-path': path }, el('label', { for: input.id }, label), input, error);
  };
  const button = (text, onclick, cls) => (readOnly ? null : el('button', { type: 'button', class: cls, onclick }, text));
  const changed = () => onInput();

  const drawOp = (op, path, onRemove) => {
    const sel = el('select', { onchange: (e) => { retype(op, e.target.value); redraw(); } },
      operators.map((t) => el('option', { value: t, selected: t === op.type }, t)));
    if (!operators.includes(op.type)) sel.prepend(el('option', { value: op.type, selected: true }, op.type));
    const text = (k, label, ph) => field(`${path}.${k}`, label, el('input', { type: 'text', value: argText(op[k]), placeholder: ph, spellcheck: 'false',
      oninput: (e) => { op[k] = k === 'regex' || k === 'target' ? e.target.value : argValue(e.target.value); changed(); } }));
    const body = [];
    if (op.type === 'AND' || op.type === 'OR') {
      op.operators = op.operators || [];
      body.push(el('ul', { class: 'op-list' }, op.operators.map((child, i) => el('li', {},
        drawOp(child, `${path}.operators[${i}]`, () => { op.operators.splice(i, 1); redraw(); })))));
      body.push(button('Add condition', () => { op.operators.push(blankOp('equals')); redraw(); }));
    } else if (op.type === 'NOT') {
      op.operator = op.operator || blankOp('equals');
      body.push(el('div', { class: 'op-list' }, drawOp(op.operator, `${path}.operator`, null)));
    } else if (op.type === 'regex') {
      body.push(text('regex', 'regex', 'a regular expression'), text('target', 'target', '${event.payload.body}'));
    } else {
      body.push(text('first', 'first', '${event.type}'), text('second', 'second', 'a value, or an accessor'));
    }
    return el('div', { class: 'op', 'data-op-path': path },
      el('div', { class: 'op-head' }, field(`${path}.type`, 'operator', sel), onRemove ? button('Remove', onRemove, 'danger') : null),
      body);
  };

  const redraw = () => {
    inputs.clear();
    const path = 'constraint.WHERE';
    fill(whereBox, model.where
      ? [drawOp(model.where, path, null), button('No condition (every event)', () => { model.where = null; redraw(); }, 'danger')]
      : [el('p', { class: 'hint' }, 'No condition: the rule matches every event that reaches its ruleset.'),
        button('Add a condition', () => { model.where = blankOp('equals'); redraw(); })]);
    fill(withBox, model.with.map((v, i) => el('div', { class: 'row', 'data-var': v.name },
      field(`constraint.WITH.${v.name || '#' + i}.name`, 'variable', el('input', { type: 'text', value: v.name, oninput: (e) => { v.name = e.target.value; changed(); }, onchange: redraw })),
      field(`constraint.WITH.${v.name || '#' + i}`, 'extractor (JSON: from, regex, modifiers_post)', el('textarea', { rows: 6, spellcheck: 'false', oninput: (e) => { v.text = e.target.value; changed(); } }, v.text)),
      button('Remove', () => { model.with.splice(i, 1); redraw(); }, 'danger'))),
    button('Add variable', () => { model.with.push({ name: '', text: pretty({ from: '${event.payload.body}', regex: { type: 'Regex', match: '(.*)', group_match_idx: 1, all_matches: false }, modifiers_post: [] }) }); redraw(); }));
    fill(actionsBox, model.actions.map((a, i) => el('div', { class: 'row', 'data-action': i },
      field(`actions[${i}].id`, 'action id', el('input', { type: 'text', value: a.id, oninput: (e) => { a.id = e.target.value; changed(); } })),
      field(`actions[${i}].payload`, 'payload (JSON)', el('textarea', { rows: 5, spellcheck: 'false', oninput: (e) => { a.text = e.target.value; changed(); } }, a.text)),
      button('Remove', () => { model.actions.splice(i, 1); redraw(); }, 'danger'))),
    button('Add action', () => { model.actions.push({ id: '', text: '{}' }); redraw(); }));
    changed();
  };

  const parse = (text, path) => {
    try { return JSON.parse(text); } catch (e) { const err = new Error(`not valid JSON: ${e.message}`); err.path = path; throw err; }
  };
  const value = () => {
    const WITH = {};
    model.with.forEach((v, i) => { WITH[v.name] = parse(v.text, `constraint.WITH.${v.name || '#' + i}`); });
    return {
      constraint: { WHERE: model.where ? structuredClone(model.where) : null, WITH },
      actions: model.actions.map((a, i) => ({ id: a.id, payload: parse(a.text, `actions[${i}].payload`) })),
    };
  };

  const clear = () => {
    for (const { input, error } of inputs.values()) { error.textContent = ''; input.closest('.field').classList.remove('invalid'); }
  };
  // showError puts msg under the input of path, or of the nearest field
  // that holds it (constraint.WITH.v.regex.match: the extractor v).
  const showError = (path, msg) => {
    let p = path;
    while (p && !inputs.has(p)) {
      const cut = Math.max(p.lastIndexOf('.'), p.lastIndexOf('['));
      p = cut > 0 ? p.slice(0, cut) : '';
    }
    const f = p && inputs.get(p);
    if (!f) return false;
    f.error.textContent = msg;
    f.input.closest('.field').classList.add('invalid');
    f.input.focus();
    return true;
  };

  redraw();
  return { where: whereBox, with: withBox, actions: actionsBox, value, showError, clear };
}
