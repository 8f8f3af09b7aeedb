// The cloud console's entry: restore or start a session, then frame the
// pages (pages.js) with the navigation and route between them.

import {h, replace} from '../lib/dom.js';
import {Client} from '../lib/api.js';
import {Router} from '../lib/router.js';
import {shell} from '../lib/shell.js';
import {field, submitting} from '../lib/form.js';
import {openStream} from '../lib/sse.js';
import {Session} from './auth.js';
import pages from './pages.js';

const root = document.getElementById('app');
const session = new Session('/api/v1');

const app = {
  name: 'edgeplat console',
  session,
  user: null,
  api: new Client({base: '/api/v1', auth: () => session.headers(), refresh: () => session.refresh(),
    onUnauthorized: () => { if (!session.loggedIn) showLogin(); }}),
  // stream opens one of the API's Server-Sent Event streams with the
  // session's credentials; it returns the function that closes it.
  stream(path, onEvent, onState) {
    return openStream('/api/v1' + path, {headers: () => session.headers(), onEvent, onState});
  },
  async logout() {
    await session.logout();
    showLogin();
  },
};

function showLogin(message = '') {
  document.title = 'Log in · edgeplat console';
  const form = h('form', {class: 'stack', 'aria-labelledby': 'login-title'},
    h('h1', {id: 'login-title', text: 'edgeplat console'}),
    message ? h('div', {class: 'alert info', role: 'status', text: message}) : null,
    field({name: 'login', label: 'Email or user name', autocomplete: 'username', required: true}),
    field({name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true}),
    h('button', {type: 'submit', id: 'login-submit', text: 'Log in'}));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(form, async () => {
      await session.login(form.elements.login.value.trim(), form.elements.password.value);
      await start();
    });
  });
  replace(root, h('div', {class: 'login'}, form));
  form.elements.login.focus();
}

async function start() {
  try {
    app.user = await app.api.get('/auth/me');
  } catch (err) {
    if (err.status === 401 || !session.loggedIn) {
      showLogin();
      return;
    }
    replace(root, h('div', {class: 'alert error', role: 'alert', text: `The API did not answer: ${err.message}`}));
    return;
  }
  const frame = shell({name: app.name, pages, user: app.user.email || app.user.username, onLogout: () => app.logout()});
  replace(root, frame.root);
  const router = new Router({pages, root: frame.main, app, fallback: '/agents', onRoute: frame.mark});
  app.navigate = (p) => router.navigate(p);
  router.render();
}

if (session.loggedIn) start();
else showLogin();
