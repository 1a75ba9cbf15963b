// Small DOM helpers: every text reaches the page as a text node, never as
// HTML, so no value from the server or the user can inject markup.

// el builds an element: attrs are attributes (on* keys add listeners,
// boolean values toggle), children are nodes, strings or null.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  append(e, children);
  return e;
}

function append(e, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(e, c);
    else e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// $ returns the element with the id.
export const $ = (id) => document.getElementById(id);

// clear empties e and appends children.
export function fill(e, ...children) {
  e.replaceChildren();
  append(e, children);
  return e;
}

// pretty formats a JSON value for reading.
export const pretty = (v) => JSON.stringify(v, null, 2);

// orDash shows a value, or an em dash for none: the one way the console
// writes a missing value.
export const orDash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));

// status shows a short message in the status line (empty, the line takes
// no room).
export function status(msg) { $('status').textContent = msg; }

// warnings lists the warnings of the last change under the status line
// (none: the list is hidden).
export function warnings(list) {
  const ul = $('warnings');
  fill(ul, list.map((w) => el('li', {}, w)));
  ul.hidden = !list.length;
}
