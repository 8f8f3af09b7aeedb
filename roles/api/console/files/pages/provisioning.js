// Provisioning keys (admins): single-use keys an agent registers itself
// with. The key is in the create answer only, so it is shown once
// (docs/access.md, "Provisioning an agent").
import {h, replace, table, fmtTime} from '../../lib/dom.js';
import {field, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, ok, pageHead, secretOnce} from './admin-common.js';

export default {
  path: '/provisioning',
  title: 'Provisioning keys',
  nav: 'Provisioning',
  async render(ctx) {
    const {root, app} = ctx;
    const msg = h('div', {'aria-live': 'polite'});
    const list = h('div', {id: 'provisioning-keys'});
    const formBox = h('div');
    replace(root, ...pageHead('Provisioning keys',
      'An agent registers itself with one of these keys (POST /api/v1/provision/agent). Each key works once; unused keys are listed here.'),
    msg, formBox, list);

    const load = async () => {
      const res = await app.api.get('/provisioning/keys');
      replace(list, table([
        {label: 'Name', value: k => k.name || '—'},
        {label: 'Prefix', value: k => h('code', {class: 'mono', text: `pk_${k.prefix}_…`})},
        {label: 'Fleet', value: k => k.fleetId ? h('a', {href: `#/fleets/${encodeURIComponent(k.fleetId)}`, text: k.fleet}) : '—'},
        {label: 'For agent', value: k => k.agentUuid ? h('a', {href: `#/agents/${encodeURIComponent(k.agentUuid)}`, class: 'mono', text: k.agentUuid}) : 'a new agent'},
        {label: 'Created', value: k => fmtTime(k.createdAt)},
        {label: 'Expires', value: k => fmtTime(k.expiresAt)},
        {label: 'Actions', value: k => confirmButton({label: 'Revoke', question: 'Revoke this key?', onConfirm: async () => {
          await app.api.del(`/provisioning/keys/${encodeURIComponent(k.id)}`);
          replace(msg, ok('Key revoked.'));
          await load();
        }})},
      ], res.keys || [], {empty: 'No unused provisioning key.'}));
    };
    try {
      await load();
    } catch (err) {
      // Members get the API's 403 message here.
      replace(list, errorBox(err));
      return;
    }

    let fleets = [];
    let agents = [];
    try {
      const [f, a] = await Promise.all([app.api.get('/fleets'), app.api.get('/agents')]);
      fleets = f.fleets || [];
      agents = a.agents || [];
    } catch (err) {
      replace(msg, errorBox(err));
    }
    const form = h('form', {class: 'stack', id: 'provisioning-create', 'aria-label': 'Create a provisioning key'},
      field({name: 'name', label: 'Name (optional)', placeholder: 'e.g. line 3 gateways'}),
      field({name: 'fleet', label: 'Fleet the agent joins', type: 'select', options: [['', 'none'], ...fleets.map(f => [f.id, f.name])]}),
      field({name: 'agentUuid', label: 'Re-provision an existing agent', type: 'select',
        options: [['', 'no: a new agent'], ...agents.map(a => [a.uuid, a.name || a.uuid])],
        help: 'For an agent that lost its credentials (after a factory reset): it keeps its UUID.'}),
      field({name: 'expiresIn', label: 'Valid for (hours)', type: 'number', min: 1, max: 8760, value: 24}),
      h('div', {}, h('button', {type: 'submit', text: 'Create provisioning key'})));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      submitting(form, async () => {
        const body = {};
        const el = form.elements;
        if (el.name.value.trim()) body.name = el.name.value.trim();
        if (el.fleet.value) body.fleet = el.fleet.value;
        if (el.agentUuid.value) body.agentUuid = el.agentUuid.value;
        if (el.expiresIn.value) body.expiresIn = Math.round(Number(el.expiresIn.value) * 3600);
        const k = await app.api.post('/provisioning/keys', body);
        form.reset();
        form.elements.expiresIn.value = '24';
        replace(msg, secretOnce('provisioning key', k.key, 'new-secret'),
          h('p', {class: 'muted', text: `Valid until ${fmtTime(k.expiresAt)}, once. On the device: edgeplat agent with this key, or POST it to /api/v1/provision/agent.`}));
        await load();
      });
    });
    replace(formBox, h('div', {class: 'panel'}, h('h2', {text: 'New key'}), form));
  },
};
