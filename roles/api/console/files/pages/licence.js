// The installation's licence: state, customer, features, limits and
// usage; restricted mode says so plainly (docs/licence.md).
import {h, replace, badge, fmtTime} from '../../lib/dom.js';
import {errorBox} from '../../lib/router.js';
import {isAdmin, ok, pageHead} from './admin-common.js';

const FEATURES = [['correlation_rules', 'Multi-metric correlation anomaly rules'], ['export', 'CSV/Parquet export'], ['ai', 'AI chat and dashboard suggestions']];

function card(label, value, id) {
  return h('div', {class: 'card', id}, h('div', {class: 'label', text: label}), h('div', {class: 'value', text: value}));
}

export default {
  path: '/licence',
  title: 'Licence',
  nav: 'Licence',
  async render(ctx) {
    const {root, app} = ctx;
    const body = h('div', {id: 'licence'});
    const msg = h('div', {'aria-live': 'polite'});
    replace(root, ...pageHead('Licence'), msg, body);

    const draw = (l) => {
      const u = l.usage || {};
      const inEffect = new Set(u.features || (l.state === 'valid' ? l.features || [] : []));
      const restricted = l.state !== 'valid';
      replace(body,
        restricted
          ? h('div', {class: 'alert error restricted', role: 'alert', id: 'licence-restricted'},
            h('strong', {text: 'Restricted mode. '}),
            `${l.message || 'No valid licence.'} (${l.reason || 'restricted'}) `,
            'Existing agents keep reporting and their data stays readable; new agent registrations and every premium feature are refused.')
          : null,
        l.demo ? h('div', {class: 'alert info', text: 'This is all-in-one\'s self-signed demo licence: every feature, for a local trial.'}) : null,
        h('div', {class: 'cards'},
          card('State', l.state, 'licence-state'),
          card('Agents', u.agents === undefined ? '—' : String(u.agents)),
          card('Agent limit', l.maxAgents ? String(l.maxAgents) : 'unlimited'),
          card('Remaining', u.agentsRemaining === null || u.agentsRemaining === undefined ? (restricted ? '0' : 'unlimited') : String(u.agentsRemaining))),
        h('h2', {text: 'Features'}),
        h('ul', {class: 'features'}, FEATURES.map(([f, label]) => h('li', {},
          inEffect.has(f) ? badge('on', 'ok') : badge('off', 'offline'), ' ', label, ' ', h('code', {class: 'muted', text: f})))),
        h('h2', {text: 'Licence as issued'}),
        h('dl', {class: 'props'},
          h('dt', {text: 'Customer'}), h('dd', {text: l.customer || '—'}),
          h('dt', {text: 'Licence ID'}), h('dd', {class: 'mono', text: l.licenceId || '—'}),
          h('dt', {text: 'Issued'}), h('dd', {text: fmtTime(l.issuedAt)}),
          h('dt', {text: 'Expires'}), h('dd', {text: fmtTime(l.expiresAt)}),
          h('dt', {text: 'Listed features'}), h('dd', {text: (l.features || []).join(', ') || 'none'})),
        isAdmin(app) ? h('p', {}, h('button', {type: 'button', class: 'secondary', id: 'licence-refresh',
          text: 'Read the licence again', onclick: async () => {
            try {
              draw(await app.api.post('/billing/refresh-license'));
              replace(msg, ok('Licence and public key read again.'));
            } catch (err) {
              replace(msg, errorBox(err));
            }
          }}), ' ', h('span', {class: 'muted', text: 'after replacing the licence file or the public key.'})) : null);
    };
    try {
      draw(await app.api.get('/license'));
    } catch (err) {
      replace(body, errorBox(err));
    }
  },
};
