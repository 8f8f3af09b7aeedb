// Pieces the administration pages share: confirmation without a modal
// dialog (a dialog would block the page and the tests that drive it),
// JSON fields, one-time secrets and short notices.
import {h, replace, copyButton} from '../../lib/dom.js';
import {ApiError} from '../../lib/api.js';

// confirmButton is a button that asks once more, in place, before it
// runs fn; a failure shows under it.
export function confirmButton({label, confirm, question, onConfirm, id, danger = true}) {
  const box = h('span', {class: 'confirm'});
  const ask = () => {
    const yes = h('button', {type: 'button', class: danger ? 'danger' : '', id: id ? `${id}-confirm` : undefined, text: confirm || label});
    const no = h('button', {type: 'button', class: 'secondary', text: 'Cancel', onclick: () => reset()});
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      no.disabled = true;
      try {
        await onConfirm();
      } catch (err) {
        replace(box, h('span', {class: 'alert error inline', role: 'alert', text: err.message}), ' ', start());
      } finally {
        yes.disabled = false;
        no.disabled = false;
      }
    });
    replace(box, h('span', {class: 'question', text: question || 'Sure?'}), ' ', yes, ' ', no);
    yes.focus();
  };
  const start = () => h('button', {type: 'button', class: danger ? 'danger' : 'secondary', id, text: label, onclick: ask});
  const reset = () => replace(box, start());
  reset();
  return box;
}

// parseJSON reads a textarea holding a JSON object; an empty one is {}.
// A syntax error is thrown as an ApiError naming the field, so
// form.js's submitting shows it next to the textarea.
export function parseJSON(text, field) {
  if (!text.trim()) return {};
  let v;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw new ApiError(0, `${field}: not valid JSON (${err.message})`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new ApiError(0, `${field}: must be a JSON object`);
  return v;
}

// secretOnce shows a secret the API gives only in its create answer,
// with a copy button and the warning that it will not be shown again.
export function secretOnce(what, secret, id) {
  return h('div', {class: 'alert warn secret-once', role: 'status', id},
    h('strong', {text: `Copy the new ${what} now: it is shown only this once.`}),
    h('p', {}, 'edgeplat keeps only its hash; if it is lost, revoke it and create another.'),
    h('div', {class: 'secret-row'}, h('code', {class: 'mono secret', 'data-secret': '', text: secret}), ' ', copyButton(secret, 'Copy')));
}

// ok is a short success notice.
export function ok(text) {
  return h('div', {class: 'alert ok', role: 'status', text});
}

// pageHead is a page's heading with an optional line under it.
export function pageHead(title, intro) {
  return [h('h1', {id: 'page-title', text: title}), intro ? h('p', {class: 'muted intro', text: intro}) : null];
}

// isAdmin tells whether the signed-in user may use the admin routes;
// the API decides anyway, this only hides forms that would be refused.
export function isAdmin(app) {
  return !!app.user && app.user.role === 'admin';
}

// detail formats an event's detail object as "key: value" pairs.
export function detail(d) {
  if (!d || typeof d !== 'object') return '';
  return Object.entries(d).map(([k, v]) => `${k}: ${typeof v === 'object' && v !== null ? JSON.stringify(v) : v}`).join(', ');
}

// userNames maps the tenant's user ids to their email, for showing who
// did what; members may not list users, and get an empty map.
export async function userNames(app) {
  if (!isAdmin(app)) return new Map();
  try {
    const res = await app.api.get('/users');
    return new Map((res.users || []).map(u => [u.id, u.email]));
  } catch {
    return new Map();
  }
}
