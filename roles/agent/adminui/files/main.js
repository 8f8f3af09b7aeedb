// The agent's admin UI: it always needs an admin session (the
// admin_session cookie, HttpOnly, which the API accepts in both security
// modes), offers the first-run setup while no admin exists, then runs the
// pages of pages.js in the shared shell.
import {Client} from '../lib/api.js';
import {h, replace} from '../lib/dom.js';
import {field, values, submitting} from '../lib/form.js';
import {Router} from '../lib/router.js';
import {shell} from '../lib/shell.js';
import pages from './pages.js';

const root = document.getElementById('app');
const name = 'edgeplat agent';

// auth talks to the session routes: a 401 there is an answer (wrong
// password), not an expired session.
const auth = new Client({base: '/v1'});

let router = null;

// api is what pages use; a 401 means the session ended (logged out in
// another tab, expired, the user deactivated): back to the login form.
const api = new Client({base: '/v1', onUnauthorized: () => {
  if (router) showLogin('Your session has ended; log in again.');
}});

async function start() {
  try {
    const me = await auth.get('/auth/me');
    return showApp(me);
  } catch (err) {
    if (err.status !== 401) return showFatal(err);
  }
  try {
    const setup = await auth.get('/auth/setup');
    if (setup.required) return showSetup(setup.apiKey);
  } catch (err) {
    return showFatal(err);
  }
  return showLogin();
}

function showFatal(err) {
  replace(root, h('div', {class: 'login'}, h('h1', {text: name}),
    h('div', {class: 'alert error', role: 'alert', text: `The agent did not answer: ${err.message}`}),
    h('button', {type: 'button', onclick: start, text: 'Try again'})));
}

function leaveApp() {
  if (router) {
    router.leave();
    router = null;
  }
}

function showLogin(notice = '') {
  leaveApp();
  const form = h('form', {class: 'stack', id: 'login', 'aria-labelledby': 'login-title'},
    notice ? h('div', {class: 'alert info', role: 'status', text: notice}) : null,
    field({name: 'username', label: 'User name', required: true, autocomplete: 'username'}),
    field({name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password'}),
    h('button', {type: 'submit', text: 'Log in'}));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const me = await submitting(form, () => auth.post('/auth/login', values(form)));
    if (me) location.reload();
  });
  replace(root, h('main', {class: 'login'}, h('h1', {id: 'login-title', text: 'Log in'}),
    h('p', {class: 'muted', text: `${name} admin`}), form));
  document.title = `Log in · ${name}`;
  form.querySelector('input').focus();
}

// showSetup creates the first admin. In API_KEY mode setup needs the
// agent's API key: it is sent once, as X-Api-Key, and never kept.
function showSetup(needsKey) {
  leaveApp();
  const form = h('form', {class: 'stack', id: 'setup', 'aria-labelledby': 'setup-title'},
    h('p', {text: 'No admin user exists yet. Create the first one; it is a superuser.'}),
    field({name: 'username', label: 'User name', required: true, autocomplete: 'username'}),
    field({name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password',
      help: 'At least 6 characters.'}),
    needsKey ? field({name: 'apiKey', label: 'Agent API key', type: 'password', required: true, autocomplete: 'off',
      help: 'This agent runs in API_KEY mode: setup needs its API_KEY once.'}) : null,
    h('button', {type: 'submit', text: 'Create admin'}));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = values(form);
    const headers = needsKey ? {'X-Api-Key': v.apiKey} : {};
    const creds = {username: v.username, password: v.password};
    const ok = await submitting(form, async () => {
      try {
        await auth.post('/auth/setup', creds, {headers});
      } catch (err) {
        // The key is checked before the body: put its 401 by its field.
        if (err.status === 401 && needsKey) err.fields = [{field: 'apiKey', message: err.message}];
        throw err;
      }
      return auth.post('/auth/login', creds);
    });
    if (ok) location.reload();
  });
  replace(root, h('main', {class: 'login'}, h('h1', {id: 'setup-title', text: 'First-run setup'}), form));
  document.title = `Setup · ${name}`;
  form.querySelector('input').focus();
}

// After a login or a logout the page loads afresh: one router per page
// load, so nothing a page started can outlive the session.
async function logout() {
  try {
    await auth.post('/auth/logout');
  } finally {
    history.replaceState(null, '', location.pathname);
    location.reload();
  }
}

function showApp(me) {
  leaveApp();
  const frame = shell({name, pages, user: me.username, onLogout: logout});
  replace(root, frame.root);
  const app = {name, api, user: me};
  router = new Router({pages, root: frame.main, app, fallback: '/', onRoute: frame.mark});
  router.render();
}

start();
