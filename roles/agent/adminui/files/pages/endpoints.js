// Endpoints: every protocol endpoint with its live health, and the
// actions on it. The health cells refresh in place every few seconds, so
// the keyboard focus stays where it is.
import {h, replace, badge, fmtAgo, fmtNum} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, confirmButton, run, status} from '../util.js';

export function deviceHref(ep) {
  return `#/devices/${encodeURIComponent(ep.protocol)}/${encodeURIComponent(ep.name)}`;
}

function healthCell(ep) {
  if (!ep.enabled) return badge('disabled', 'stopped');
  const hl = ep.health;
  if (!hl) return badge('starting', 'queued');
  return h('span', {}, badge(hl.status || hl.state || 'unknown'),
    ' ', h('span', {class: 'muted', text: hl.connected ? `${fmtNum(hl.communicationQuality)} % good · ${fmtAgo(hl.lastSeen)}` : (hl.lastError || hl.reason || '')}));
}

export default {
  path: '/endpoints',
  title: 'Endpoints',
  nav: 'Endpoints',
  render(ctx) {
    const {api} = ctx.app;
    const msg = h('div', {id: 'endpoints-status'});
    const body = h('div');
    replace(ctx.root, heading('Endpoints', h('a', {class: 'button', href: '#/endpoints/new', id: 'new-endpoint', text: 'New endpoint'})), msg, body);
    let shown = '';
    const cells = new Map();
    const load = async () => {
      let list;
      try {
        list = (await api.get('/endpoints')).endpoints || [];
      } catch (err) {
        replace(body, errorBox(err));
        shown = '';
        return;
      }
      const key = JSON.stringify(list.map(e => [e.name, e.protocol, e.enabled]));
      if (key === shown) {
        for (const ep of list) {
          const c = cells.get(ep.name);
          if (c) replace(c, healthCell(ep));
        }
        return;
      }
      shown = key;
      cells.clear();
      if (!list.length) {
        replace(body, h('p', {class: 'empty', text: 'No endpoint yet. Create one to start reading a device.'}));
        return;
      }
      replace(body, h('table', {class: 'grid', id: 'endpoints'},
        h('thead', {}, h('tr', {}, ['Name', 'Protocol', 'Poll', 'Points', 'Health', 'Actions'].map(t => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, list.map(ep => {
          const hc = h('td', {'data-health': ep.name}, healthCell(ep));
          cells.set(ep.name, hc);
          return h('tr', {'data-endpoint': ep.name},
            h('td', {}, h('a', {href: deviceHref(ep), text: ep.name})),
            h('td', {text: ep.protocol}),
            h('td', {text: ep.poll_interval ? `${ep.poll_interval} ms` : '—'}),
            h('td', {text: String((ep.data_points || []).length)}),
            hc,
            h('td', {}, h('div', {class: 'row-actions'},
              h('a', {class: 'button secondary', href: `#/endpoints/edit/${encodeURIComponent(ep.name)}`, text: 'Edit', 'aria-label': `Edit ${ep.name}`}),
              h('button', {type: 'button', class: 'secondary', text: ep.enabled ? 'Disable' : 'Enable',
                onclick: () => run(msg, async () => {
                  await api.patch(`/endpoints/${encodeURIComponent(ep.name)}`, {enabled: !ep.enabled});
                  status(msg, 'ok', `${ep.name} ${ep.enabled ? 'disabled' : 'enabled'}.`);
                  await load();
                })}),
              confirmButton('Delete', () => run(msg, async () => {
                await api.del(`/endpoints/${encodeURIComponent(ep.name)}`);
                status(msg, 'ok', `${ep.name} deleted.`);
                await load();
              })))));
        }))));
    };
    return every(5000, load);
  },
};
