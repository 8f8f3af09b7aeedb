// DOM building without HTML strings: every text goes in as a text node,
// so nothing the API returns can become markup (the pages' CSP forbids
// inline script anyway; this keeps markup injection out too).

// h builds an element. attrs: "class", "text", "on<event>" handlers,
// boolean properties (disabled, checked, hidden), "data-*", "aria-*" and
// any other attribute. children: nodes, strings, arrays, null (skipped).
export function h(tag, attrs = {}, ...children) {
  const el = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'selected') el[k] = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace swaps el's children for children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// fmtTime shows a timestamp (ms, ISO string or Date) in local time.
export function fmtTime(t) {
  if (t === null || t === undefined || t === '') return '—';
  const d = t instanceof Date ? t : new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toLocaleString();
}

// fmtAgo shows how long ago t was: "12 s ago".
export function fmtAgo(t, now = Date.now()) {
  if (!t) return 'never';
  const s = Math.round((now - new Date(t).getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

// fmtNum shows a number with at most `decimals` decimals.
export function fmtNum(v, decimals = 2) {
  if (typeof v !== 'number') return v === null || v === undefined ? '—' : String(v);
  return Number.isInteger(v) ? String(v) : v.toFixed(decimals).replace(/\.?0+$/, '');
}

// fmtBytes shows a byte count in binary units.
export function fmtBytes(n) {
  if (typeof n !== 'number') return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// table builds a table from column specs {label, value(row) -> node|string}.
export function table(columns, rows, {empty = 'Nothing yet.', caption} = {}) {
  if (!rows.length) return h('p', {class: 'empty', text: empty});
  return h('table', {class: 'grid'},
    caption ? h('caption', {text: caption}) : null,
    h('thead', {}, h('tr', {}, columns.map(c => h('th', {scope: 'col', text: c.label})))),
    h('tbody', {}, rows.map(r => h('tr', {}, columns.map(c => h('td', {}, c.value(r)))))));
}

// badge shows a short status word, coloured by its kind.
export function badge(word, kind = word) {
  return h('span', {class: `badge badge-${String(kind).toLowerCase().replace(/[^a-z0-9]+/g, '-')}`, text: word});
}

// copyButton copies text to the clipboard and says so.
export function copyButton(text, label = 'Copy') {
  const b = h('button', {type: 'button', class: 'secondary', text: label, onclick: async () => {
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = 'Copied';
    } catch {
      b.textContent = 'Select and copy it by hand';
    }
    setTimeout(() => { b.textContent = label; }, 2000);
  }});
  return b;
}
