// What a draft changes, node by node: a summary (nodes and rules added,
// removed, changed) above the changes grouped by node, each group a
// collapsible <details>; the JSON line diff of the whole tree stays one
// click away below.
import { el, fill, pretty } from './dom.js';
import { fromExport } from './tree.js';
import { renderDiff } from './diff.js';

// stable writes a JSON value with sorted keys, to compare values.
function stable(v) {
  if (Array.isArray(v)) return '[' + v.map(stable).join(',') + ']';
  if (v && typeof v === 'object') return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + stable(v[k])).join(',') + '}';
  return JSON.stringify(v ?? null);
}
const same = (a, b) => stable(a) === stable(b);

// own is what a node is, without its children and rules.
function own(n) {
  const o = { type: n.kind };
  if (n.kind !== 'Ruleset') Object.assign(o, { description: n.description, active: n.active });
  if (n.kind === 'Filter') o.filter = n.filter;
  if (n.kind === 'Iterator') o.target = n.target;
  return o;
}

// ruleBody is a rule as the API writes it.
const ruleBody = (r) => ({ name: r.name, description: r.description, continue: r.continue, active: r.active, constraint: r.constraint, actions: r.actions });

// count is the number of nodes and rules in a subtree.
function count(n) {
  let nodes = 1;
  let rules = n.rules.length;
  for (const c of n.nodes) { const k = count(c); nodes += k.nodes; rules += k.rules; }
  return { nodes, rules };
}

// diffTrees compares two trees (tree.js models) and returns the summary
// {nodes: {added, removed, changed}, rules: {…}} and the groups, one per
// node with a change, in tree order: {path, kind, change ('added',
// 'removed', 'changed'), fields: [{name, before, after}], rules: [{name,
// change, before, after}], order and nodeOrder (the order of the rules, of
// the child nodes changed), below ({nodes,
// rules} of an added or removed subtree)}.
export function diffTrees(a, b) {
  const sum = { nodes: { added: 0, removed: 0, changed: 0 }, rules: { added: 0, removed: 0, changed: 0 } };
  const groups = [];
  const whole = (n, change) => {
    const k = count(n);
    sum.nodes[change] += k.nodes;
    sum.rules[change] += k.rules;
    groups.push({ path: n.path, kind: n.kind, change, fields: [], rules: [], order: false, nodeOrder: false, below: k });
  };
  const walk = (x, y) => {
    const g = { path: y.path, kind: y.kind, change: 'changed', fields: [], rules: [], order: false, nodeOrder: false };
    const ox = own(x);
    const oy = own(y);
    for (const k of new Set([...Object.keys(ox), ...Object.keys(oy)])) {
      if (!same(ox[k], oy[k])) g.fields.push({ name: k, before: ox[k], after: oy[k] });
    }
    const rx = new Map(x.rules.map((r) => [r.name, r]));
    const ry = new Map(y.rules.map((r) => [r.name, r]));
    for (const r of x.rules) if (!ry.has(r.name)) g.rules.push({ name: r.name, change: 'removed', before: ruleBody(r), after: null });
    for (const r of y.rules) {
      const old = rx.get(r.name);
      if (!old) g.rules.push({ name: r.name, change: 'added', before: null, after: ruleBody(r) });
      else if (!same(ruleBody(old), ruleBody(r))) g.rules.push({ name: r.name, change: 'changed', before: ruleBody(old), after: ruleBody(r) });
    }
    const kept = (rules, other) => rules.filter((r) => other.has(r.name)).map((r) => r.name).join(',');
    g.order = kept(x.rules, ry) !== kept(y.rules, rx);
    const cx = new Map(x.nodes.map((c) => [c.name, c]));
    const cy = new Map(y.nodes.map((c) => [c.name, c]));
    g.nodeOrder = kept(x.nodes, cy) !== kept(y.nodes, cx);
    for (const r of g.rules) sum.rules[r.change]++;
    // A node is changed when its own settings or its rules' order are;
    // a group shows its rules' changes too.
    if (g.fields.length || g.order || g.nodeOrder) sum.nodes.changed++;
    if (g.fields.length || g.rules.length || g.order || g.nodeOrder) groups.push(g);
    for (const c of x.nodes) {
      const now = cy.get(c.name);
      if (!now) whole(c, 'removed');
      else if (now.kind !== c.kind) { whole(c, 'removed'); whole(now, 'added'); }
      else walk(c, now);
    }
    for (const c of y.nodes) if (!cx.has(c.name)) whole(c, 'added');
  };
  if (a.kind === b.kind && a.name === b.name) walk(a, b);
  else { whole(a, 'removed'); whole(b, 'added'); }
  return { sum, groups };
}

const plural = (n, what) => `${n} ${what}${n === 1 ? '' : 's'}`;

// summaryText says the summary in words: "1 node changed; 1 rule
// added, 2 changed".
export function summaryText(sum) {
  const part = (k, what) => ['added', 'removed', 'changed'].filter((c) => sum[k][c])
    .map((c, i) => (i ? `${sum[k][c]} ${c}` : `${plural(sum[k][c], what)} ${c}`)).join(', ');
  return [part('nodes', 'node'), part('rules', 'rule')].filter(Boolean).join('; ');
}

// changeBlock shows a value before and after as a line diff.
function changeBlock(label, before, after) {
  const box = el('div', { class: 'diff' });
  renderDiff(box, before === undefined || before === null ? '' : pretty(before), after === undefined || after === null ? '' : pretty(after));
  return [label ? el('h4', {}, label) : null, box];
}

// renderTreeDiff shows the diff of two export texts in container and
// returns the summary with its total and its text. words name the sides:
// the summary's lead and the sentence for no change.
export function renderTreeDiff(container, activeText, draftText, words = { lead: 'Against the active tree', same: 'The draft is the same as the active tree.' }) {
  const { sum, groups } = diffTrees(fromExport(JSON.parse(activeText)), fromExport(JSON.parse(draftText)));
  const total = ['nodes', 'rules'].reduce((t, k) => t + sum[k].added + sum[k].removed + sum[k].changed, 0);
  const text = summaryText(sum);
  const cell = (k, c) => el('td', { 'data-count': `${k}-${c}` }, String(sum[k][c]));
  const table = el('table', { class: 'diff-summary' },
    el('thead', {}, el('tr', {}, el('th', {}, ''), ['added', 'removed', 'changed'].map((c) => el('th', { scope: 'col' }, c)))),
    el('tbody', {}, ['nodes', 'rules'].map((k) => el('tr', {}, el('th', { scope: 'row' }, k), ['added', 'removed', 'changed'].map((c) => cell(k, c))))));
  const open = groups.length <= 5;
  const group = (g) => el('details', { class: 'diff-group', open, 'data-node': g.path.join(','), 'data-change': g.change },
    el('summary', {}, el('span', { class: 'kind' }, g.kind), g.path.join(' › '), ' ', el('span', { class: 'chg chg-' + g.change }, g.change),
      g.below ? ` (${plural(g.below.nodes, 'node')}, ${plural(g.below.rules, 'rule')})` : ''),
    g.fields.map((f) => changeBlock(f.name, f.before, f.after)),
    g.order ? el('p', {}, 'The order of the rules changed.') : null,
    g.nodeOrder ? el('p', {}, 'The order of the child nodes changed.') : null,
    g.rules.map((r) => el('details', { class: 'diff-rule', open: true, 'data-rule': r.name, 'data-change': r.change },
      el('summary', {}, el('span', { class: 'kind' }, 'Rule'), r.name, ' ', el('span', { class: 'chg chg-' + r.change }, r.change)),
      changeBlock('', r.before, r.after))));
  const raw = el('details', { class: 'diff-raw' }, el('summary', {}, 'The whole tree as JSON, line by line'), el('div', { class: 'diff' }));
  renderDiff(raw.lastChild, activeText, draftText);
  fill(container,
    total ? [el('p', { class: 'diff-text' }, `${words.lead}: ${text}.`), table, groups.map(group)]
      : el('p', { class: 'hint' }, words.same),
    raw);
  return { ...sum, total, text };
}
