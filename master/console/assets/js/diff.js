// A line diff (longest common subsequence) of two texts, for the draft
// against the active tree.
import { el, fill } from './dom.js';

// lineDiff returns [{op: ' '|'+'|'-', line}]. Texts of more than
// maxLines lines each are compared as wholes (removed, then added).
export function lineDiff(a, b, maxLines = 5000) {
  const x = a.split('\n');
  const y = b.split('\n');
  if (x.length > maxLines || y.length > maxLines) {
    return [...x.map((line) => ({ op: '-', line })), ...y.map((line) => ({ op: '+', line }))];
  }
  const n = x.length;
  const m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push({ op: ' ', line: x[i] }); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ op: '-', line: x[i++] });
    else out.push({ op: '+', line: y[j++] });
  }
  while (i < n) out.push({ op: '-', line: x[i++] });
  while (j < m) out.push({ op: '+', line: y[j++] });
  return out;
}

// renderDiff shows the changed lines with 3 lines of context; it returns
// the number of changed lines.
export function renderDiff(container, a, b) {
  const d = lineDiff(a, b);
  const keep = d.map(() => false);
  d.forEach((l, k) => {
    if (l.op !== ' ') for (let c = Math.max(0, k - 3); c <= Math.min(d.length - 1, k + 3); c++) keep[c] = true;
  });
  const rows = [];
  let gap = false;
  d.forEach((l, k) => {
    if (!keep[k]) { gap = true; return; }
    if (gap) rows.push(el('div', { class: 'ctx' }, '…'));
    gap = false;
    rows.push(el('div', { class: l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'ctx' }, l.op + ' ' + l.line));
  });
  const changed = d.filter((l) => l.op !== ' ').length;
  fill(container, changed ? rows : el('div', { class: 'ctx' }, 'The draft is the same as the active tree.'));
  return changed;
}
