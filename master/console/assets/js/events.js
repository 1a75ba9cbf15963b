// Test events: an editor with examples, run against the active tree or the
// draft, and the processed tree drawn with each node's and rule's status.
import { el, fill, pretty } from './dom.js';
import { renderExplain } from './explain.js';

// examples are starting points for the editor; dev is true for those of
// squall dev's example tree, offered by squall dev alone.
export const examples = [
  { name: 'Disk alert (squall dev example)', dev: true, event: { type: 'disk_alert', created_ms: 1700000000000, metadata: { tenant_id: 'master' }, payload: { host: 'web-1', message: 'Disk 95% full on /var' } } },
  { name: 'E-mail', event: { type: 'email', created_ms: 1554130814854, metadata: { tenant_id: 'master' }, payload: { body: '95 Degrees on host-1' } } },
  { name: 'Empty event', event: { type: '', created_ms: 0, metadata: {}, payload: {} } },
];

const statusOf = (n) => (n.filter || n.iterator || {}).status || (n.rules ? rulesetStatus(n.rules.rules) : '');

function rulesetStatus(rules) {
  if (rules.some((r) => r.status === 'Matched')) return 'Matched';
  if (rules.some((r) => r.status === 'PartiallyMatched')) return 'PartiallyMatched';
  return rules.length && rules.every((r) => r.status === 'NotProcessed') ? 'NotProcessed' : 'NotMatched';
}

const badge = (s) => (s ? el('span', { class: 'badge st-' + s, 'data-status': s }, s) : null);

function drawRule(rule, vars) {
  const actions = rule.action || rule.actions || [];
  return el('li', { 'data-rule': rule.name, 'data-status': rule.status },
    el('details', { open: rule.status === 'Matched' || rule.status === 'PartiallyMatched' },
      el('summary', {}, el('span', { class: 'kind' }, 'Rule'), rule.name, badge(rule.status)),
      rule.message ? el('p', { class: 'error' }, rule.message) : null,
      vars && Object.keys(vars).length ? [el('h4', {}, 'Extracted variables'), el('pre', {}, pretty(vars))] : null,
      actions.length ? [el('h4', {}, 'Resolved actions'), el('pre', {}, pretty(actions))] : null));
}

function drawNode(n) {
  const s = statusOf(n);
  const kids = [];
  if (n.type === 'Ruleset') {
    const vars = (n.rules && n.rules.extracted_vars) || {};
    for (const r of (n.rules && n.rules.rules) || []) kids.push(drawRule(r, vars[r.name]));
  } else if (n.type === 'Iterator') {
    (n.events || []).forEach((it, i) => kids.push(el('li', {},
      el('details', { open: true }, el('summary', {}, `iteration ${i}`), el('ul', {}, (it.nodes || []).map(drawNode))))));
  } else {
    for (const c of n.nodes || []) kids.push(drawNode(c));
  }
  return el('li', { 'data-node': n.name, 'data-status': s },
    el('details', { open: s !== 'NotMatched' && s !== 'Ignored' },
      el('summary', {}, el('span', { class: 'kind' }, n.type), n.name, badge(s)),
      el('ul', {}, kids)));
}

// renderResult draws a test event's answer.
export function renderResult(container, answer) {
  const errs = answer.action_errors || [];
  fill(container,
    el('h3', {}, 'Processed tree'),
    el('ul', {}, drawNode(answer.result)),
    answer.explain ? renderExplain(answer.explain) : null,
    errs.length ? [el('h3', {}, 'Action errors'), el('pre', { class: 'error' }, pretty(errs))] : null);
}
