// Addresses: every place in the console is a hash route, so that it can
// be bookmarked, shared and reloaded, and back and forward move between
// places. A route is #/VIEW[/SEGMENT…][?QUERY]:
//
//   #/tree/root/master/disks                    a node of the active tree
//   #/tree/root/master/disks/archive_disk_alerts a rule (a ruleset's child)
//   #/tree/root/master?source=draft             the same, in the draft
//   #/draft/root/master/disks                   a node in the draft's editor
//   #/draft?diff=1                              the draft's diff with the active tree
//   #/findings?state=Resolved&page=2            findings, filtered and paged
//   #/findings/UID                              one finding
//   #/history/N?from=M                          what changes from version M to N (no from: the active tree to N)
//   #/events, #/fleet, #/deadletters, #/audit, #/history
//
// Node paths are absolute (from root), whatever the authorization: a link
// names the same place for every user who may see it. The #token= sign-in
// fragment is not a route (app.js reads and clears it first).

export const views = ['tree', 'draft', 'events', 'findings', 'fleet', 'deadletters', 'audit', 'history'];

// parse reads a location hash; anything that is not a route is the tree.
export function parse(hash) {
  const m = /^#\/([^/?]*)((?:\/[^?]*)?)(?:\?(.*))?$/.exec(hash || '');
  if (!m || !views.includes(m[1])) return { view: '', path: [], params: new URLSearchParams() };
  const path = m[2].split('/').filter((s) => s !== '').map((s) => {
    try { return decodeURIComponent(s); } catch { return s; }
  });
  return { view: m[1], path, params: new URLSearchParams(m[3] || '') };
}

// format writes a route as a hash; params with empty values are left out.
export function format({ view, path = [], params = {} }) {
  const q = new URLSearchParams();
  for (const [k, v] of params instanceof URLSearchParams ? params : Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const qs = q.toString();
  return `#/${view}${path.map((s) => '/' + encodeURIComponent(s)).join('')}${qs ? '?' + qs : ''}`;
}

// Router calls apply(route) for every new address: a link followed, a
// reload, back and forward, an address typed in. go() moves to a place as
// a new history entry; replace() records the place the page shows now
// without a new entry and without applying it again.
export class Router {
  constructor(apply) {
    this.apply = apply;
    this.applied = null;
    const on = () => this.check();
    window.addEventListener('hashchange', on);
    window.addEventListener('popstate', on);
  }

  get route() { return parse(window.location.hash); }

  // check applies the address if it is a route not applied yet.
  check(force = false) {
    const h = window.location.hash;
    if (!force && h === this.applied) return;
    const r = parse(h);
    if (!r.view) return;
    this.applied = h;
    this.apply(r);
  }

  go(route) {
    const h = format(route);
    if (h === window.location.hash) { this.check(true); return; }
    history.pushState(null, '', h);
    this.check();
  }

  replace(route) {
    const h = format(route);
    this.applied = h;
    if (h !== window.location.hash) history.replaceState(null, '', h);
  }
}

// itemPath is the absolute path of a tree item: prefix (the names above
// the authorization's node) with its node path, and a rule's name.
export function itemPath(prefix, item) {
  return [...prefix, ...item.path, ...(item.kind === 'Rule' ? [item.name] : [])];
}

// resolve finds the node or rule an absolute path names in root (whose
// paths start at the authorization's node, below prefix): null when the
// path is not in it. A ruleset has rules and no child nodes, so a name
// after a ruleset's is a rule's.
export function resolve(root, prefix, path) {
  if (!root || path.length <= prefix.length) return null;
  if (prefix.some((p, i) => path[i] !== p)) return null;
  const rest = path.slice(prefix.length);
  if (rest[0] !== root.name) return null;
  let item = root;
  for (const name of rest.slice(1)) {
    if (item.kind === 'Rule') return null;
    if (item.kind === 'Ruleset') item = item.rules.find((r) => r.name === name);
    else item = item.nodes.find((n) => n.name === name);
    if (!item) return null;
  }
  return item;
}
