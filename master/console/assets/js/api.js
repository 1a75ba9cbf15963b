// The API client: every call carries the session's bearer token; an error
// answer becomes an ApiError with the server's code, params and message.

export class ApiError extends Error {
  constructor(status, code, params, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || '';
    this.params = params || {};
  }
}

// treeRoles are the roles that grant something of the tree. An
// authorization with none of them (only findings_read, findings_write or
// fleet_report) serves the findings API alone (decision 8): the console
// shows it no tree.
const treeRoles = ['view', 'edit', 'admin', 'test_event_execute_actions'];
const onTree = (a) => !!a && (a.roles || []).some((r) => treeRoles.includes(r));

// Session holds the token (in this tab's sessionStorage) and its claims.
export class Session {
  constructor(storage) {
    this.storage = storage;
    this.token = storage.getItem('squall.token') || '';
    this.authName = storage.getItem('squall.auth') || '';
  }

  signIn(token) {
    const claims = decodeToken(token);
    this.token = token;
    this.storage.setItem('squall.token', token);
    const names = treeAuthNames(claims);
    if (!Object.keys(claims.auths).length && !claims.tenant) throw new Error('The token has no authorization and no tenant: it grants nothing.');
    if (!names.includes(this.authName)) this.setAuth(names[0] || '');
    return claims;
  }

  signOut() {
    this.token = '';
    this.storage.removeItem('squall.token');
    this.storage.removeItem('squall.auth');
  }

  setAuth(name) {
    this.authName = name;
    this.storage.setItem('squall.auth', name);
  }

  claims() { return this.token ? decodeToken(this.token) : null; }

  // auth is the selected authorization: {name, path, roles}.
  auth() {
    const c = this.claims();
    const a = c && c.auths[this.authName];
    return onTree(a) ? { name: this.authName, path: a.path || [], roles: a.roles || [] } : null;
  }

  // can tells whether the selected authorization has role; the server
  // decides in the end, this only hides what it would refuse.
  can(role) {
    const a = this.auth();
    if (!a) return false;
    const r = a.roles;
    if (r.includes('admin')) return true;
    if (role === 'view') return r.includes('view') || r.includes('edit');
    if (role === 'full') return r.includes('test_event_execute_actions');
    return r.includes(role);
  }

  async request(method, path, body, opts = {}) {
    const headers = { Authorization: 'Bearer ' + this.token };
    let payload;
    if (body instanceof FormData) payload = body;
    else if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = typeof body === 'string' ? body : JSON.stringify(body);
    }
    const resp = await fetch(path, { method, headers, body: payload, cache: 'no-store', credentials: 'omit' });
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!resp.ok) {
      const e = data && typeof data === 'object' ? data : {};
      const err = new ApiError(resp.status, e.code, e.params, e.message || text.trim());
      err.details = e.details;
      throw err;
    }
    // A draft change answers null; what it wrote that no executor
    // handles comes in a header (decision 9). Every successful write
    // reports its warnings, none included, so the last one's are shown.
    if (method !== 'GET' && this.onWarnings) this.onWarnings(parseWarnings(resp.headers.get('X-Squall-Warnings')));
    return opts.raw ? text : data;
  }
}

// parseWarnings reads the X-Squall-Warnings header: a JSON array of
// strings; anything else is no warning.
export function parseWarnings(header) {
  if (!header) return [];
  try {
    const w = JSON.parse(header);
    return Array.isArray(w) ? w.filter((x) => typeof x === 'string') : [];
  } catch {
    return [];
  }
}

// treeAuthNames lists, sorted, the names of the claims' authorizations
// that grant something of the tree.
export function treeAuthNames(claims) {
  return Object.keys(claims.auths).filter((n) => onTree(claims.auths[n])).sort();
}

// decodeToken reads the claims of a JWT or of a spec-format unsigned
// token (base64 JSON). It verifies nothing: the server does.
export function decodeToken(token) {
  const t = token.trim();
  const parts = t.split('.');
  const raw = parts.length === 3 ? parts[1] : t;
  let claims;
  try {
    const b64 = raw.replace(/-/g, '+').replace(/_/g, '/');
    const json = new TextDecoder().decode(Uint8Array.from(atob(b64 + '='.repeat((4 - b64.length % 4) % 4)), (c) => c.charCodeAt(0)));
    claims = JSON.parse(json);
  } catch {
    throw new Error('This is not a Squall token (a JWT or base64 JSON with user and auths).');
  }
  if (!claims || typeof claims.user !== 'string' || !claims.auths || typeof claims.auths !== 'object') {
    throw new Error('The token has no user and authorizations.');
  }
  return claims;
}

// nodePath joins node names into the API's comma-separated node path.
export const nodePath = (names) => names.map(encodeURIComponent).join(',');
