// Admin users: list, create, change active / superuser / password,
// delete. Changes need a superuser; the API's 403 says so.
import {h, replace, badge} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {heading, confirmButton, run, status} from '../util.js';

export default {
  path: '/users',
  title: 'Admin users',
  nav: 'Admin users',
  async render(ctx) {
    const {api, user} = ctx.app;
    const msg = h('div', {id: 'users-status', 'aria-live': 'polite'});
    const list = h('div', {id: 'users'});
    const form = h('form', {class: 'stack', id: 'user-form', novalidate: true},
      field({name: 'username', label: 'User name', required: true, autocomplete: 'off'}),
      field({name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password', help: '6 to 72 characters.'}),
      field({name: 'is_superuser', label: 'Superuser (may manage users)', type: 'checkbox'}),
      field({name: 'is_active', label: 'Active', type: 'checkbox', value: true}),
      h('button', {type: 'submit', text: 'Create user'}));
    replace(ctx.root, heading('Admin users'),
      user.is_superuser ? null : h('div', {class: 'alert info', text: 'You are not a superuser: you can see the users but not change them.'}),
      msg, list, h('section', {class: 'panel'}, h('h2', {text: 'New user'}), form));

    const load = async () => {
      let r;
      try {
        r = await api.get('/admin/users');
      } catch (err) {
        replace(list, errorBox(err));
        return;
      }
      if (ctx.stale()) return;
      const patch = (u, body, done) => run(msg, async () => {
        await api.patch(`/admin/users/${encodeURIComponent(u.username)}`, body);
        status(msg, 'ok', done);
        await load();
      });
      replace(list, h('table', {class: 'grid'},
        h('thead', {}, h('tr', {}, ['User', 'Active', 'Superuser', 'Password', 'Actions'].map(t => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, (r.users || []).map(u => {
          const pw = h('form', {class: 'inline-form', 'aria-label': `New password for ${u.username}`},
            field({name: 'password', label: 'New password', type: 'password', autocomplete: 'new-password'}),
            h('button', {type: 'submit', class: 'secondary', text: 'Set'}));
          pw.addEventListener('submit', async (e) => {
            e.preventDefault();
            const ok = await submitting(pw, () => api.patch(`/admin/users/${encodeURIComponent(u.username)}`, values(pw)));
            if (ok) status(msg, 'ok', `Password of ${u.username} changed; their sessions ended.`);
          });
          return h('tr', {'data-user': u.username},
            h('td', {}, u.username, u.username === user.username ? h('span', {class: 'muted', text: ' (you)'}) : null),
            h('td', {}, badge(u.is_active ? 'active' : 'inactive', u.is_active ? 'ok' : 'stopped')),
            h('td', {text: u.is_superuser ? 'yes' : 'no'}),
            h('td', {}, pw),
            h('td', {}, h('div', {class: 'row-actions'},
              h('button', {type: 'button', class: 'secondary', text: u.is_active ? 'Deactivate' : 'Activate',
                onclick: () => patch(u, {is_active: !u.is_active}, `${u.username} ${u.is_active ? 'deactivated' : 'activated'}.`)}),
              h('button', {type: 'button', class: 'secondary', text: u.is_superuser ? 'Make regular' : 'Make superuser',
                onclick: () => patch(u, {is_superuser: !u.is_superuser}, `${u.username} changed.`)}),
              confirmButton('Delete', () => run(msg, async () => {
                await api.del(`/admin/users/${encodeURIComponent(u.username)}`);
                status(msg, 'ok', `${u.username} deleted.`);
                await load();
              })))));
        }))));
    };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const created = await submitting(form, () => api.post('/admin/users', values(form)));
      if (created) {
        for (const el of form.querySelectorAll('input[type=text], input[type=password]')) el.value = '';
        status(msg, 'ok', `${created.username} created.`);
        await load();
      }
    });
    await load();
  },
};
