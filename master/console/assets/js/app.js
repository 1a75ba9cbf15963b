// The console's entry point: sign-in (a pasted token, or the squall dev
// link's #token= fragment, moved into session storage and cleared from
// the address), the tabs and their addresses (router.js), the tree and the
// test events.
import { el, fill, $, pretty, status, warnings } from './dom.js';
import { Session, nodePath, treeAuthNames, decodeToken } from './api.js';
import { fromExport, render, find, details, keyOf } from './tree.js';
import { examples, renderResult } from './events.js';
import { Findings } from './findings.js';
import { Draft } from './draft.js';
import { DraftBacktest } from './backtest.js';
import { loadFleet } from './fleet.js';
import { DeadLetters, deadLetterAccess } from './deadletters.js';
import { AuditLog, auditAccess } from './audit.js';
import { VersionHistory } from './history.js';
import { Router, itemPath, resolve } from './router.js';
import { showActiveInfo } from './treeinfo.js';
import { loadStats } from './stats.js';

const session = new Session(window.sessionStorage);
session.onWarnings = warnings;
const cfg = '/api/v2_beta/config';
const state = { active: null, selected: '', view: '', last: {}, stats: null };
let findings;
let draft;
let draftBacktest;
let deadLetters;
let auditLog;
let versions;
let router;

// takeFragmentToken reads a #token=… fragment once, on load and when a
// link is opened in a tab already showing the console, and removes it from
// the address bar and the history entry at once (the address is the
// place the tab showed again). A signed-out tab signs in
// with it; a tab signed in as someone else asks before it switches
// identity, so that neither a reload nor a link switches it silently.
function takeFragmentToken() {
  const m = /^#token=(.+)$/.exec(window.location.hash);
  if (!m) return;
  // The address goes back to the place the tab showed, if any.
  history.replaceState(null, '', window.location.pathname + window.location.search + ((router && router.applied) || ''));
  const token = decodeURIComponent(m[1]);
  if (!session.token) {
    try { session.signIn(token); } catch (e) { $('signin-error').textContent = e.message; }
    return;
  }
  if (token === session.token) return;
  let user;
  try { user = decodeToken(token).user; } catch (e) { status(`The link's token cannot be read: ${e.message}`); return; }
  askToSwitch(token, user);
}

// askToSwitch shows, above the page, whether to sign in as user with the
// link's token or to stay signed in as now.
function askToSwitch(token, user) {
  const old = $('identity-switch');
  if (old) old.remove();
  const current = session.claims().user;
  const box = el('div', { id: 'identity-switch', class: 'warn', role: 'alert' },
    `The link you opened signs in as ${user}; you are signed in as ${current}. `,
    el('button', { type: 'button', id: 'identity-switch-accept', onclick: () => {
      box.remove();
      try { session.signIn(token); } catch (e) { status(e.message); return; }
      window.location.reload();
    } }, `Sign in as ${user}`), ' ',
    el('button', { type: 'button', id: 'identity-switch-stay', onclick: () => box.remove() }, `Stay signed in as ${current}`));
  document.body.prepend(box);
}

function showSignIn(msg = '') {
  $('app').hidden = true;
  $('who').hidden = true;
  $('signin').hidden = false;
  $('signin-error').textContent = msg;
  $('signin-token').focus();
}

function showWho() {
  const c = session.claims();
  const sel = $('auth-select');
  fill(sel, treeAuthNames(c).map((n) => el('option', { value: n, selected: n === session.authName }, `${n} (${(c.auths[n].path || []).join(' › ')})`)));
  $('who-user').textContent = c.user;
  const a = session.auth();
  fill($('who-roles'), (a ? a.roles : []).map((r) => el('span', { 'data-role': r }, r)));
  $('who').hidden = false;
  // A findings-only token (no authorization with a tree role: only
  // findings_read / findings_write, or a bare tenant) sees the findings.
  for (const v of ['tree', 'draft', 'events', 'fleet', 'history']) $('tab-' + v).hidden = !a;
  $('tab-deadletters').hidden = !deadLetterAccess(c).read;
  $('tab-audit').hidden = !auditAccess(c);
  $('auth-select').closest('label').hidden = !a;
  // Hide what the roles forbid; the server refuses it anyway.
  for (const e of document.querySelectorAll('[data-needs="edit"]')) e.hidden = !session.can('edit');
  $('event-full').disabled = !session.can('full');
  $('event-full').hidden = !session.can('full');
  if (!session.can('full')) $('event-mode').value = 'SkipActions';
}

async function start() {
  $('signin').hidden = true;
  $('app').hidden = false;
  showWho();
  router.check(true);
  if (!router.route.view) router.go({ view: session.auth() ? 'tree' : 'findings' });
}

// prefix is the names above the authorization's node: a route's node
// paths are absolute, the tree's start at that node.
const prefix = () => { const a = session.auth(); return a ? a.path.slice(0, -1) : []; };

// applyRoute shows the place a route names (router.js).
async function applyRoute(r) {
  if (!session.token || $('app').hidden) return; // start() applies it after the sign-in
  const may = (v) => !!session.auth() || v === 'findings' || (v === 'deadletters' && deadLetterAccess(session.claims()).read);
  if (!may(r.view)) { router.replace({ view: 'findings' }); r = router.route; }
  state.last[r.view] = r;
  await switchView(r.view, r);
}

function selectTab(view) {
  for (const b of document.querySelectorAll('.tabs [role="tab"]')) {
    const on = b.dataset.view === view;
    b.setAttribute('aria-selected', String(on));
    b.tabIndex = on ? 0 : -1;
    $('view-' + b.dataset.view).hidden = !on;
  }
}

async function switchView(view, r) {
  const entering = state.view !== view;
  state.view = view;
  selectTab(view);
  status('');
  try {
    if (view === 'tree') await showTree(r, entering);
    else if (view === 'draft') { await draft.show(r, entering, prefix()); await draftBacktest.show(); }
    else if (view === 'findings') await findings.show(r);
    else if (view === 'fleet') await loadFleet(session);
    else if (view === 'deadletters') await deadLetters.load();
    else if (view === 'audit') await auditLog.load();
    else if (view === 'history') await versions.show(r);
    else if (view === 'events') await loadDraftIdForEvents();
  } catch (e) {
    if (e.status === 401) { session.signOut(); showSignIn(`Signed out: ${e.message}`); return; }
    status(`${e.code ? e.code + ': ' : ''}${e.message}`);
  }
}

// showTree shows the route's tree (the active one, or the draft with
// ?source=draft) and selects the node or rule its path names. It reads the
// tree again when the tab is entered or the source changes.
async function showTree(r, entering) {
  const source = r.params.get('source') === 'draft' ? 'draft' : 'active';
  if (entering || !state.active || state.source !== source) {
    state.source = source;
    $('tree-source').value = source;
    state.active = null;
    await loadTree();
  }
  if (!state.active) return;
  const item = resolve(state.active, prefix(), r.path);
  state.selected = item ? keyOf(item) : '';
  drawTree();
  fill($('tree-details'), item ? details(item)
    : el('p', { class: r.path.length ? 'error' : 'hint' }, r.path.length ? `Nothing is at ${r.path.join(' › ')} in this tree.` : 'Select a node or a rule.'));
}

// Tree view: the active tree or the draft, from their exports.
async function loadTree() {
  const a = session.auth();
  const base = nodePath([a.path[a.path.length - 1]]);
  let doc;
  if ($('tree-source').value === 'draft') {
    const ids = await session.request('GET', `${cfg}/drafts/${a.name}`);
    if (!ids.length) { fill($('tree'), el('p', { class: 'hint' }, 'There is no draft.')); return; }
    doc = await session.request('GET', `${cfg}/draft/tree/export/${a.name}/${ids[0]}/${base}`);
    state.stats = null;
  } else {
    let stats;
    [doc, stats] = await Promise.all([session.request('GET', `${cfg}/active/tree/export/${a.name}/${base}`),
      loadStats(session).catch(() => null)]);
    state.stats = stats;
  }
  showActiveInfo(session, $('tree-info'), $('tree-source').value);
  state.active = fromExport(doc);
  drawTree();
  const sel = state.selected && find(state.active, state.selected);
  fill($('tree-details'), sel ? details(sel) : el('p', { class: 'hint' }, 'Select a node or a rule.'));
}

function drawTree() {
  const stats = state.stats;
  $('tree-dead').disabled = !stats;
  $('tree-stats').textContent = stats ? `Hits since the deploy at index ${stats.index}, summed over the engines.` : '';
  render($('tree'), state.active, {
    query: $('tree-search').value, selected: state.selected, stats: stats && stats.byKey, deadOnly: !!stats && $('tree-dead').checked,
    onSelect: (item) => router.go({ view: 'tree', path: itemPath(prefix(), item), params: { source: $('tree-source').value === 'draft' ? 'draft' : '' } }),
  });
}

// Test events.
async function loadDraftIdForEvents() {
  const ids = await session.request('GET', `${cfg}/drafts/${session.auth().name}`);
  state.draftId = ids[0] || '';
  $('event-target').querySelector('option[value="draft"]').disabled = !state.draftId;
  if (!state.draftId) $('event-target').value = 'active';
}

async function runEvent(e) {
  e.preventDefault();
  $('event-error').textContent = '';
  let ev;
  try { ev = JSON.parse($('event-body').value); } catch (ex) { $('event-error').textContent = `The event is not valid JSON: ${ex.message}`; $('event-body').focus(); return; }
  const a = session.auth();
  const target = $('event-target').value;
  const path = target === 'draft' ? `/api/v2_beta/event/draft/${a.name}/${state.draftId}` : `/api/v2_beta/event/active/${a.name}`;
  try {
    const body = { process_type: $('event-mode').value, event: ev };
    if ($('event-explain').checked) body.explain = true;
    const ans = await session.request('POST', path, body);
    renderResult($('event-result'), ans);
    status(`Event processed by the ${target === 'draft' ? 'draft' : 'active tree'} (${$('event-mode').value}).`);
  } catch (ex) {
    fill($('event-result'));
    $('event-error').textContent = `${ex.code ? ex.code + ': ' : ''}${ex.message}`;
  }
}

function wire() {
  $('signin-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    try { session.signIn($('signin-token').value); } catch (ex) { $('signin-error').textContent = ex.message; return; }
    $('signin-token').value = '';
    await start();
  });
  // Signing out forgets the token and reloads the page, so that nothing
  // the previous user saw stays in it.
  $('sign-out').addEventListener('click', () => { session.signOut(); window.location.replace(window.location.pathname); });
  $('auth-select').addEventListener('change', async (e) => { session.setAuth(e.target.value); state.selected = ''; state.view = ''; showWho(); router.check(true); });
  const tabs = [...document.querySelectorAll('.tabs [role="tab"]')];
  tabs.forEach((b, i) => {
    b.addEventListener('click', () => router.go(state.last[b.dataset.view] || { view: b.dataset.view }));
    b.addEventListener('keydown', (e) => {
      const d = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
      if (!d) return;
      const next = tabs[(i + d + tabs.length) % tabs.length];
      next.focus();
      router.go(state.last[next.dataset.view] || { view: next.dataset.view });
    });
  });
  $('tree-search').addEventListener('input', () => state.active && drawTree());
  $('tree-dead').addEventListener('change', () => state.active && drawTree());
  $('tree-source').addEventListener('change', (e) => router.go({ view: 'tree', params: { source: e.target.value === 'draft' ? 'draft' : '' } }));
  $('tree-reload').addEventListener('click', () => { state.view = ''; router.check(true); });
  $('fleet-reload').addEventListener('click', () => switchView('fleet', router.route));
  // The squall dev example is offered by squall dev alone (its page is
  // marked data-mode="dev"), where its tree exists.
  const offered = examples.filter((x) => !x.dev || document.documentElement.dataset.mode === 'dev');
  fill($('event-example'), offered.map((x, i) => el('option', { value: i }, x.name)));
  $('event-example').addEventListener('change', (e) => { $('event-body').value = pretty(offered[e.target.value].event); });
  $('event-body').value = pretty(offered[0].event);
  $('event-form').addEventListener('submit', runEvent);
  findings = new Findings(session, {
    navigate: (params, uid) => router.go({ view: 'findings', path: uid ? [uid] : [], params }),
  });
  draft = new Draft(session, {
    onChange: () => {},
    navigate: (item, params) => router.go({ view: 'draft', path: item ? itemPath(prefix(), item) : [], params }),
    place: (item, params) => router.replace({ view: 'draft', path: item ? itemPath(prefix(), item) : [], params }),
  });
  draftBacktest = new DraftBacktest(session, () => ({ id: draft.id, mine: !!draft.id && draft.owner === session.claims().user }));
  deadLetters = new DeadLetters(session);
  auditLog = new AuditLog(session);
  versions = new VersionHistory(session, {
    navigate: (n, from, page) => router.go({ view: 'history', path: n ? [String(n)] : [], params: { from, page: page > 1 ? page : '' } }),
  });
}

wire();
takeFragmentToken();
window.addEventListener('hashchange', takeFragmentToken);
router = new Router(applyRoute);
if (session.token) {
  try { session.claims(); start(); } catch (e) { session.signOut(); showSignIn(e.message); }
} else {
  showSignIn();
}
