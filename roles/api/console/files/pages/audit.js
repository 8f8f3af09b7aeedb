// The tenant's audit log (admins), newest first, filtered by kind, actor
// and time and paged with the answer's nextBefore (docs/access.md).
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {qs} from '../../lib/api.js';
import {field} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {detail, pageHead, userNames} from './admin-common.js';

// isoOrEmpty turns a datetime-local input's value into RFC 3339.
function isoOrEmpty(v) {
  if (!v) return '';
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? '' : d.toISOString();
}

export default {
  path: '/audit',
  title: 'Audit log',
  nav: 'Audit log',
  async render(ctx) {
    const {root, app, query} = ctx;
    const list = h('div', {id: 'audit-events'});
    const more = h('div');
    const form = h('form', {class: 'toolbar', id: 'audit-filter', role: 'search'},
      field({name: 'kind', label: 'Kind', value: query.get('kind') || '', placeholder: 'e.g. auth.login'}),
      field({name: 'actor', label: 'Actor', value: query.get('actor') || '', placeholder: 'user id or agent UUID'}),
      field({name: 'from', label: 'From', type: 'datetime-local'}),
      field({name: 'to', label: 'To', type: 'datetime-local'}),
      field({name: 'limit', label: 'Per page', type: 'select', options: [['50', '50'], ['100', '100'], ['500', '500']], value: '50'}),
      h('button', {type: 'submit', text: 'Show'}));
    replace(root, ...pageHead('Audit log', 'Logins, keys, users, agents, fleets, jobs and target states, newest first.'), form, list, more);

    let rows = [];
    const users = await userNames(app);
    const load = async (before) => {
      const el = form.elements;
      const res = await app.api.get('/audit/events' + qs({kind: el.kind.value.trim(), actor: el.actor.value.trim(),
        from: isoOrEmpty(el.from.value), to: isoOrEmpty(el.to.value), limit: el.limit.value, before}));
      rows = before ? rows.concat(res.events || []) : (res.events || []);
      replace(list, table([
        {label: 'Time', value: e => h('time', {datetime: e.at, text: fmtTime(e.at)})},
        {label: 'Kind', value: e => h('button', {type: 'button', class: 'link', title: 'Show only this kind', text: e.kind,
          onclick: () => { el.kind.value = e.kind; show(); }})},
        {label: 'Actor', value: e => h('span', {title: e.actor}, h('span', {class: 'muted', text: `${e.actorKind} `}),
          (e.actorKind === 'user' && users.get(e.actor)) || e.actor || '—')},
        {label: 'Target', value: e => e.target ? h('span', {class: 'mono', text: e.target}) : '—'},
        {label: 'Outcome', value: e => badge(e.outcome, e.outcome === 'success' ? 'ok' : 'error')},
        {label: 'Detail', value: e => h('span', {class: 'detail', text: detail(e.detail) || '—'})},
        {label: 'IP', value: e => e.ip || '—'},
      ], rows, {empty: 'No event matches.'}));
      replace(more, res.nextBefore ? h('button', {type: 'button', class: 'secondary', id: 'audit-more', text: 'Older events',
        onclick: () => load(res.nextBefore).catch(err => replace(more, errorBox(err)))}) : null);
    };
    const show = () => load().catch(err => replace(list, errorBox(err)));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      show();
    });
    await show();
  },
};
