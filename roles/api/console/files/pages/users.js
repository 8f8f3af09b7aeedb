// The tenant's accounts and invitations (admins only; docs/access.md,
// "Users, invitations, API keys, audit").
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, ok, pageHead} from './admin-common.js';

const ROLES = [['member', 'member'], ['admin', 'admin']];

export default {
  path: '/users',
  title: 'Users',
  nav: 'Users',
  async render(ctx) {
    const {root, app} = ctx;
    const msg = h('div', {'aria-live': 'polite'});
    const usersBox = h('div', {id: 'users'});
    const invitesBox = h('div', {id: 'invites'});
    const forms = h('div');
    replace(root, ...pageHead('Users', 'Accounts of this tenant. Admins manage users, keys, agents and provisioning; members read.'),
      msg, usersBox, h('h2', {text: 'Invitations'}), invitesBox, forms);
    const say = (t) => replace(msg, ok(t));

    const userRow = (u) => {
      const role = h('select', {'aria-label': `Role of ${u.email}`}, ROLES.map(([v, l]) => h('option', {value: v, text: l, selected: u.role === v})));
      const active = h('input', {type: 'checkbox', 'aria-label': `${u.email} is active`, checked: u.active});
      const save = h('button', {type: 'button', class: 'secondary', text: 'Save', onclick: async () => {
        save.disabled = true;
        try {
          await app.api.put(`/users/${encodeURIComponent(u.id)}`, {role: role.value, active: active.checked});
          say(`${u.email} saved.`);
          await load();
        } catch (err) {
          replace(msg, errorBox(err));
        } finally {
          save.disabled = false;
        }
      }});
      return {u, role, active, save};
    };

    const load = async () => {
      const [us, inv] = await Promise.all([app.api.get('/users'), app.api.get('/invites')]);
      const rows = (us.users || []).map(userRow);
      replace(usersBox, table([
        {label: 'Email', value: r => r.u.email},
        {label: 'User name', value: r => r.u.username || '—'},
        {label: 'Role', value: r => r.role},
        {label: 'Active', value: r => r.active},
        {label: 'Created', value: r => fmtTime(r.u.createdAt)},
        {label: 'Actions', value: r => h('div', {class: 'actions'}, r.save,
          h('button', {type: 'button', class: 'secondary', text: 'Send reset link', onclick: async () => {
            try {
              await app.api.post('/auth/reset-password', {userId: r.u.id});
              say(`A password reset link was sent to ${r.u.email}.`);
            } catch (err) {
              replace(msg, errorBox(err));
            }
          }}),
          r.u.id === app.user.id ? null : confirmButton({label: 'Delete', question: `Delete ${r.u.email}?`, onConfirm: async () => {
            await app.api.del(`/users/${encodeURIComponent(r.u.id)}`);
            say(`${r.u.email} deleted.`);
            await load();
          }}))},
      ], rows, {empty: 'No user.'}));
      replace(invitesBox, table([
        {label: 'Email', value: i => i.email},
        {label: 'Role', value: i => badge(i.role)},
        {label: 'Expires', value: i => fmtTime(i.expiresAt)},
        {label: 'Actions', value: i => confirmButton({label: 'Cancel invitation', question: `Cancel the invitation of ${i.email}?`, onConfirm: async () => {
          await app.api.del(`/invites/${encodeURIComponent(i.id)}`);
          say(`Invitation of ${i.email} cancelled.`);
          await load();
        }})},
      ], inv.invites || [], {empty: 'No open invitation.'}));
    };

    try {
      await load();
    } catch (err) {
      // Members get the API's 403 message here.
      replace(usersBox, errorBox(err));
      replace(invitesBox);
      return;
    }

    const create = h('form', {class: 'stack', id: 'user-create', 'aria-label': 'Create a user'},
      field({name: 'email', label: 'Email', type: 'email', required: true}),
      field({name: 'username', label: 'User name (optional)'}),
      field({name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password', help: 'At least 8 characters.'}),
      field({name: 'role', label: 'Role', type: 'select', options: ROLES, value: 'member'}),
      h('div', {}, h('button', {type: 'submit', text: 'Create user'})));
    create.addEventListener('submit', (e) => {
      e.preventDefault();
      submitting(create, async () => {
        const u = await app.api.post('/users', values(create));
        create.reset();
        say(`${u.email} created.`);
        await load();
      });
    });
    const invite = h('form', {class: 'stack', id: 'invite-create', 'aria-label': 'Invite someone'},
      field({name: 'email', label: 'Email', type: 'email', required: true}),
      field({name: 'role', label: 'Role', type: 'select', options: ROLES, value: 'member'}),
      h('div', {}, h('button', {type: 'submit', text: 'Send invitation'})));
    invite.addEventListener('submit', (e) => {
      e.preventDefault();
      submitting(invite, async () => {
        const i = await app.api.post('/invites', values(invite));
        invite.reset();
        say(`Invitation mailed to ${i.email}.`);
        await load();
      });
    });
    replace(forms, h('details', {class: 'panel'}, h('summary', {text: 'Create a user'}), create),
      h('details', {class: 'panel'}, h('summary', {text: 'Invite someone by email'}), invite));
  },
};
