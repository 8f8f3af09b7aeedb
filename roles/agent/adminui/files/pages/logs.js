// Logs: the agent's recent log lines (a ring of 5000) with the filters
// GET /v1/logs takes (minimum level, source, since, limit) and a text
// filter applied here. Refreshed every 5 s while "Follow" is on.
import {h, replace, badge, fmtTime} from '../../lib/dom.js';
import {field, values} from '../../lib/form.js';
import {qs} from '../../lib/api.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading} from '../util.js';

export default {
  path: '/logs',
  title: 'Logs',
  nav: 'Logs',
  render(ctx) {
    const {api} = ctx.app;
    const list = h('div', {id: 'logs'});
    const count = h('p', {class: 'muted', 'aria-live': 'polite'});
    const form = h('form', {class: 'filters', id: 'log-filters'},
      field({name: 'level', label: 'Level at least', type: 'select', value: ctx.query.get('level') || '',
        options: [['', 'any'], ['debug', 'debug'], ['info', 'info'], ['warn', 'warn'], ['error', 'error']]}),
      field({name: 'source', label: 'Source', type: 'select', value: '',
        options: [['', 'any'], ['system', 'system'], ['container', 'container'], ['manager', 'manager']]}),
      field({name: 'since', label: 'Since', type: 'datetime-local'}),
      field({name: 'limit', label: 'Lines', type: 'number', value: 200, min: 1, max: 1000}),
      field({name: 'text', label: 'Containing', type: 'search', placeholder: 'text'}),
      field({name: 'follow', label: 'Follow', type: 'checkbox', value: true}),
      h('button', {type: 'submit', text: 'Show'}));
    replace(ctx.root, heading('Logs'), form, count, list);
    const load = async () => {
      const v = values(form);
      const since = v.since ? new Date(v.since).getTime() : '';
      let r;
      try {
        r = await api.get('/logs' + qs({level: v.level, source: v.source, since, limit: v.limit}));
      } catch (err) {
        replace(list, errorBox(err));
        return;
      }
      const needle = v.text.trim().toLowerCase();
      const rows = (r.logs || []).filter(l => !needle || `${l.message} ${l.component}`.toLowerCase().includes(needle)).reverse();
      replace(count, `${rows.length} shown of ${r.total} kept.`);
      replace(list, rows.length ? h('table', {class: 'grid'},
        h('thead', {}, h('tr', {}, ['Time', 'Level', 'Component', 'Message'].map(t => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, rows.map(l => h('tr', {'data-level': l.level},
          h('td', {text: fmtTime(l.timestamp)}), h('td', {}, badge(l.level, l.level === 'warn' ? 'degraded' : l.level)),
          h('td', {text: l.component || l.source || ''}), h('td', {class: 'log-line mono', text: l.message}))))) : h('p', {class: 'empty', text: 'No log line matches.'}));
    };
    form.addEventListener('submit', (e) => { e.preventDefault(); load(); });
    return every(5000, async () => {
      if (form.querySelector('[data-input="follow"]').checked) await load();
    });
  },
};
