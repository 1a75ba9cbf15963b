// The explanation of a test event sent with "explain": one line per
// filter, iterator and rule the event reached, saying why it came out as
// it did, with each condition as evaluated (nested for AND, OR and NOT)
// and each WITH extraction. Values come from the server and reach the
// page as text only (dom.js).
import { el } from './dom.js';

// words are how the console reads an operator.
const words = {
  equals: 'equals', ne: 'does not equal', equalsIgnoreCase: 'equals (ignoring case)',
  contains: 'contains', containsIgnoreCase: 'contains (ignoring case)',
  ge: '≥', gt: '>', le: '≤', lt: '<',
};

// preview shows a value's JSON, long ones cut.
function preview(json) {
  const s = JSON.stringify(json);
  return s.length > 120 ? s.slice(0, 119) + '…' : s;
}

// operand reads an operand: its expression and the value it resolved to,
// or that it is missing; a constant is its value.
function operand(o) {
  if (!o) return '';
  const cut = o.value_truncated ? ' (cut)' : '';
  if (o.missing) return `${o.expr || ''} is missing`;
  if (!o.expr) return preview(o.value);
  return `${o.expr} = ${preview(o.value)}${cut}`;
}

const outcome = (b) => el('span', { class: 'outcome outcome-' + b }, b ? 'true' : 'false');

// condText is a comparison in one line.
function condText(c) {
  if (c.op === 'regex') return [operand(c.target), ` matches /${c.regex}/ `];
  return [operand(c.first), ` ${words[c.op] || c.op} `, operand(c.second), ' '];
}

function drawCond(c) {
  if (c.op === 'AND' || c.op === 'OR' || c.op === 'NOT') {
    const what = c.op === 'NOT' ? 'NOT (the opposite of)' : c.op === 'AND' ? 'AND (all of)' : 'OR (any of)';
    return el('li', { class: 'cond', 'data-op': c.op, 'data-outcome': String(c.outcome) },
      what, ' → ', outcome(c.outcome), el('ul', {}, (c.operands || []).map(drawCond)));
  }
  return el('li', { class: 'cond', 'data-op': c.op, 'data-outcome': String(c.outcome) }, condText(c), '→ ', outcome(c.outcome));
}

function drawVariable(v) {
  const got = v.error
    ? el('span', { class: 'error' }, ` failed: ${v.error}`)
    : [' → ', el('code', {}, preview(v.value)), v.value_truncated ? ' (cut)' : ''];
  return el('li', { class: 'variable', 'data-variable': v.variable },
    `${v.variable}: from ${operand(v.from)}, ${v.kind} /${v.regex}/ `,
    el('span', { class: 'outcome outcome-' + v.matched }, v.matched ? 'matched' : 'did not match'), got);
}

function drawEntry(e) {
  const name = e.kind === 'rule' ? `${e.path} › ${e.rule}` : e.path;
  const depth = e.path.split('/').length - 1 + (e.kind === 'rule' ? 1 : 0);
  const detail = [];
  if (e.target) detail.push(el('p', {}, `target ${operand(e.target)}`));
  if (e.condition) detail.push(el('ul', { class: 'conds' }, drawCond(e.condition)));
  if (e.variables) detail.push(el('p', {}, 'WITH'), el('ul', { class: 'variables' }, e.variables.map(drawVariable)));
  const attrs = { class: 'explain-entry', 'data-kind': e.kind, 'data-path': e.path, 'data-status': e.status };
  if (e.rule) attrs['data-rule'] = e.rule;
  const li = el('li', attrs,
    el('details', { open: e.status !== 'NotProcessed' && e.status !== 'Ignored' },
      el('summary', {}, el('span', { class: 'kind' }, e.kind), name,
        el('span', { class: 'badge st-' + e.status }, e.status), ' ', el('span', { class: 'reason' }, e.reason)),
      detail));
  // Indented as deep as the node is (CSSOM: the CSP allows no inline style).
  li.style.marginLeft = `${Math.min(depth, 20)}em`;
  return li;
}

// renderExplain draws an explanation.
export function renderExplain(x) {
  return el('section', { class: 'explain', 'aria-label': 'explanation' },
    el('h3', {}, 'Explanation'),
    el('p', { class: 'hint' }, 'Every filter, iterator and rule the event reached, in tree order, and why.'),
    el('ul', {}, (x.entries || []).map(drawEntry)),
    x.truncated ? el('p', { class: 'warn', 'data-truncated': 'true' }, `Explanation cut: ${x.note}`) : null);
}
