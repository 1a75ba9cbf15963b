// The processing tree: an exported tree (the API's file format) turned
// into a plain model, drawn as a collapsible, searchable tree.
import { el, fill, pretty } from './dom.js';
import { hits, neverMatched } from './stats.js';

// fromExport turns an export document into nodes {kind, name, path,
// description, active, filter, target, nodes, rules}; parent is the path
// of the exported node's parent (names from the authorization's node).
export function fromExport(doc, parent = []) {
  const kind = ['Filter', 'Iterator', 'Ruleset'].find((k) => doc && doc[k]);
  if (!kind) throw new Error('not an exported tree');
  const n = doc[kind];
  const path = [...parent, n.name];
  const node = { kind, name: n.name, path, nodes: [], rules: [] };
  if (kind === 'Filter') {
    const f = n.filter || {};
    Object.assign(node, { description: f.description || '', active: f.active !== false, filter: f.filter ?? null });
  } else if (kind === 'Iterator') {
    const it = n.iterator || {};
    Object.assign(node, { description: it.description || '', active: it.active !== false, target: it.target || '' });
  } else {
    node.active = true;
    node.rules = (n.rules || []).map((r) => ({ ...r, kind: 'Rule', path }));
  }
  node.nodes = (n.nodes || []).map((c) => fromExport(c, path));
  return node;
}

// matches tells whether the node or a rule below it has q in its name.
function matches(node, q) {
  if (!q) return true;
  if (node.name.toLowerCase().includes(q)) return true;
  return node.rules.some((r) => r.name.toLowerCase().includes(q)) || node.nodes.some((c) => matches(c, q));
}

function label(item, q, onSelect, selectedKey, stats) {
  const key = keyOf(item);
  const hit = q && item.name.toLowerCase().includes(q);
  return el('button', {
    type: 'button', class: 'node-btn' + (item.active === false ? ' inactive' : ''),
    'data-key': key, 'aria-current': key === selectedKey ? 'true' : null,
    onclick: (ev) => { ev.preventDefault(); onSelect(item); },
  }, el('span', { class: 'kind' }, item.kind), el('span', { class: hit ? 'match' : null }, item.name),
  item.active === false ? ' (inactive)' : null, stats ? hits(stats.get(key), item.kind) : null);
}

// keyOf names a node or rule uniquely: its path, and the rule's name.
export const keyOf = (item) => item.path.join(',') + (item.kind === 'Rule' ? '/' + item.name : '');

// render draws root into container. Filters and iterators are <details>
// (keyboard: Tab to a node, Enter or Space to open or close it); a search
// shows only what matches, and what leads to it, opened. With stats (a
// Map of counts by key, stats.js) every node and rule shows its hits;
// deadOnly shows only the rules with no match since the deploy, and what
// leads to them.
export function render(container, root, { query = '', onSelect, selected = '', stats = null, deadOnly = false }) {
  const q = query.trim().toLowerCase();
  const ruleShown = (node, r) => (!q || r.name.toLowerCase().includes(q) || node.name.toLowerCase().includes(q)) &&
    (!deadOnly || neverMatched(stats && stats.get(keyOf(r))));
  const shown = (node) => (deadOnly
    ? (node.kind === 'Ruleset' ? node.rules.some((r) => ruleShown(node, r)) : node.nodes.some(shown))
    : matches(node, q));
  const draw = (node) => {
    if (!shown(node)) return null;
    if (node.kind === 'Ruleset') {
      const rules = node.rules.filter((r) => ruleShown(node, r));
      return el('li', {}, el('details', { open: true },
        el('summary', {}, label(node, q, onSelect, selected, stats), ` ${node.rules.length} rule${node.rules.length === 1 ? '' : 's'}`),
        el('ul', {}, rules.map((r) => el('li', { class: 'leaf' }, label(r, q, onSelect, selected, stats))))));
    }
    return el('li', {}, el('details', { open: true },
      el('summary', {}, label(node, q, onSelect, selected, stats)),
      el('ul', {}, node.nodes.map(draw))));
  };
  const tree = draw(root);
  const none = deadOnly ? (q ? `No rule named like “${query}” lacks a match since the deploy.` : 'Every rule matched since the deploy.')
    : `Nothing is named like “${query}”.`;
  fill(container, tree ? el('ul', {}, tree) : el('p', { class: 'hint', id: 'tree-none' }, none));
}

// find returns the node or rule with key in root.
export function find(root, key) {
  if (keyOf(root) === key) return root;
  for (const r of root.rules) if (keyOf(r) === key) return r;
  for (const c of root.nodes) {
    const f = find(c, key);
    if (f) return f;
  }
  return null;
}

// details shows a node's or rule's settings.
export function details(item) {
  const rows = [['Type', item.kind], ['Name', item.name], ['Path', item.path.join(' › ')]];
  const blocks = [];
  if (item.kind === 'Rule') {
    rows.push(['Description', item.description || '—'], ['Active', String(item.active)], ['Continue', String(item.continue)]);
    const c = item.constraint || {};
    blocks.push(['Where', c.WHERE ?? null], ['With (extracted variables)', c.WITH || {}], ['Actions', item.actions || []]);
  } else if (item.kind === 'Ruleset') {
    rows.push(['Rules', item.rules.map((r) => r.name + (r.active ? '' : ' (inactive)')).join(', ') || '—']);
  } else {
    rows.push(['Description', item.description || '—'], ['Active', String(item.active)], ['Children', String(item.nodes.length)]);
    if (item.kind === 'Filter') blocks.push(['Filter', item.filter]);
    else rows.push(['Target', item.target]);
  }
  return [
    el('h2', {}, item.name),
    el('dl', {}, rows.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
    blocks.map(([k, v]) => [el('h3', {}, k), el('pre', {}, pretty(v))]),
  ];
}
