// Small pieces several admin pages share.
import {h, replace} from '../lib/dom.js';
import {errorBox} from '../lib/router.js';

// heading is a page's h1 (the router focuses it) with optional actions.
export function heading(title, ...actions) {
  return h('div', {class: 'toolbar'}, h('h1', {id: 'page-title', text: title}), ...actions);
}

// status shows the outcome of an action in el: ok, info or an error.
export function status(el, kind, message) {
  if (kind === 'error') replace(el, errorBox(message));
  else replace(el, h('div', {class: `alert ${kind}`, role: 'status', text: message}));
}

// confirmButton asks a second click before a destructive action, without
// a modal dialog: the button turns into "Confirm …" for a few seconds.
export function confirmButton(label, onConfirm, {confirmLabel = `Confirm: ${label.toLowerCase()}`} = {}) {
  let armed = false;
  let timer = null;
  const b = h('button', {type: 'button', class: 'danger', text: label, onclick: async () => {
    if (!armed) {
      armed = true;
      b.textContent = confirmLabel;
      timer = setTimeout(() => { armed = false; b.textContent = label; }, 5000);
      return;
    }
    clearTimeout(timer);
    armed = false;
    b.textContent = label;
    b.disabled = true;
    try { await onConfirm(); } finally { b.disabled = false; }
  }});
  return b;
}

// run runs an action and reports its failure in el (cleared first).
export async function run(el, fn, okMessage = '') {
  replace(el);
  try {
    const out = await fn();
    if (okMessage) status(el, 'ok', okMessage);
    return out;
  } catch (err) {
    status(el, 'error', err);
    return undefined;
  }
}

// linesToList reads a textarea holding one item per line.
export function linesToList(s) {
  return String(s || '').split(/\r?\n|,/).map(x => x.trim()).filter(Boolean);
}

// prune drops empty strings from an object (not nested), so optional
// fields left blank take the API's defaults.
export function prune(o) {
  for (const [k, v] of Object.entries(o || {})) {
    if (v === '') delete o[k];
  }
  return o;
}

// bytes of a number shown with one decimal and its unit.
export function pct(v) {
  return typeof v === 'number' ? `${v.toFixed(1)} %` : '—';
}
