// User API keys: members manage their own, admins the tenant's. The
// secret is in the create answer only, so it is shown once, here, and
// never again (docs/access.md).
import {h, replace, table, badge, fmtTime, fmtAgo} from '../../lib/dom.js';
import {field, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, ok, pageHead, secretOnce} from './admin-common.js';

export default {
  path: '/api-keys',
  title: 'API keys',
  nav: 'API keys',
  async render(ctx) {
    const {root, app} = ctx;
    const msg = h('div', {'aria-live': 'polite'});
    const list = h('div', {id: 'api-keys'});
    const form = h('form', {class: 'toolbar', id: 'api-key-create', 'aria-label': 'Create an API key'},
      field({name: 'name', label: 'Name', required: true, placeholder: 'e.g. nightly export'}),
      h('button', {type: 'submit', text: 'Create key'}));
    replace(root, ...pageHead('API keys', 'Keys for scripts: a key acts as its user, with the user\'s current role, until it is revoked.'),
      msg, h('div', {class: 'panel'}, h('h2', {text: 'New key'}), form), list);

    const load = async () => {
      const res = await app.api.get('/api-keys');
      replace(list, table([
        {label: 'Name', value: k => k.name},
        {label: 'Prefix', value: k => h('code', {class: 'mono', text: `ek_${k.prefix}_…`})},
        {label: 'Created', value: k => fmtTime(k.createdAt)},
        {label: 'Last used', value: k => fmtAgo(k.lastUsedAt)},
        {label: 'State', value: k => k.revokedAt ? badge('revoked', 'offline') : badge('active', 'ok')},
        {label: 'Actions', value: k => k.revokedAt ? '—' : confirmButton({label: 'Revoke', question: `Revoke ${k.name}? Scripts using it stop working.`,
          onConfirm: async () => {
            await app.api.del(`/api-keys/${encodeURIComponent(k.id)}`);
            replace(msg, ok(`${k.name} revoked.`));
            await load();
          }})},
      ], res.apiKeys || [], {empty: 'No API key yet.'}));
    };
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      submitting(form, async () => {
        const res = await app.api.post('/api-keys', {name: form.elements.name.value.trim()});
        form.reset();
        replace(msg, secretOnce('API key', res.key, 'new-secret'));
        await load();
      });
    });
    try {
      await load();
    } catch (err) {
      replace(list, errorBox(err));
    }
  },
};
