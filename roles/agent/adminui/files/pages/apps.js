// Apps: every application with its services' state, refreshed every 3 s
// in place, the actions per service and per app, and the container
// runtime's connection (docs/apps.md): its state, its configuration and
// a connection test that saves nothing.
import {h, replace} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, confirmButton, run, status} from '../util.js';
import {servicesTable, runtimeLine, structure, refreshCells} from '../app-view.js';

const types = [['socket', 'Unix socket'], ['tcp', 'TCP'], ['tcp+tls', 'TCP with TLS']];
const byType = {
  socket: ['socketPath'],
  tcp: ['host', 'port'],
  'tcp+tls': ['host', 'port', 'ca', 'cert', 'key'],
};

// runtimeForm edits GET/POST /v1/docker/config; the fields a type does
// not use are disabled, so they are not sent. The key shows masked and
// the mask sent back keeps it.
async function runtimeForm(api, el) {
  let cfg;
  try {
    cfg = await api.get('/docker/config');
  } catch (err) {
    replace(el, errorBox(err));
    return;
  }
  const out = h('div', {id: 'runtime-status'});
  const form = h('form', {class: 'stack wide', id: 'runtime-form', novalidate: true},
    field({name: 'type', label: 'Connection', type: 'select', options: types, value: cfg.type || 'socket'}),
    h('div', {class: 'grid2'},
      field({name: 'socketPath', label: 'Socket path', value: cfg.socketPath ?? '', placeholder: '/var/run/docker.sock'}),
      field({name: 'host', label: 'Host', value: cfg.host ?? ''}),
      field({name: 'port', label: 'Port', type: 'number', value: cfg.port || '', min: 1, max: 65535, placeholder: '2375 / 2376'})),
    h('div', {class: 'grid2'},
      field({name: 'ca', label: 'CA certificate (PEM)', type: 'textarea', rows: 3, value: cfg.ca ?? ''}),
      field({name: 'cert', label: 'Client certificate (PEM)', type: 'textarea', rows: 3, value: cfg.cert ?? ''}),
      field({name: 'key', label: 'Client key (PEM)', type: 'textarea', rows: 3, value: cfg.key ?? '',
        help: cfg.key ? 'A key is set; leave the mask to keep it.' : ''})),
    h('div', {class: 'row-actions'},
      h('button', {type: 'submit', id: 'save-runtime', text: 'Save and reconnect'}),
      h('button', {type: 'button', class: 'secondary', id: 'test-runtime', text: 'Test connection',
        onclick: () => submitting(form, async () => {
          const r = await api.post('/docker/test', body());
          status(out, 'ok', `Connected: engine ${r.version}, ${r.containers} containers.`);
        })})),
    out);
  const typeInput = form.querySelector('[data-input="type"]');
  const toggle = () => {
    const used = byType[typeInput.value] || [];
    for (const k of ['socketPath', 'host', 'port', 'ca', 'cert', 'key']) {
      const input = form.querySelector(`[data-input="${k}"]`);
      input.disabled = !used.includes(k);
      input.closest('.field').hidden = input.disabled;
    }
  };
  const body = () => {
    const v = values(form);
    for (const k of Object.keys(v)) {
      if (v[k] === '') delete v[k];
    }
    return v;
  };
  typeInput.addEventListener('change', toggle);
  toggle();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    replace(out);
    const ok = await submitting(form, () => api.post('/docker/config', body()));
    if (ok) status(out, 'ok', 'Saved; the agent reconnects to the runtime.');
  });
  replace(el, form);
}

export default {
  path: '/apps',
  title: 'Apps',
  nav: 'Apps',
  render(ctx) {
    const {api} = ctx.app;
    const msg = h('div', {id: 'apps-status'});
    const rt = h('div', {id: 'apps-runtime'});
    const body = h('div', {id: 'apps'});
    const rtForm = h('div');
    replace(ctx.root, heading('Apps', h('a', {class: 'button', href: '#/apps/new', id: 'new-app', text: 'New app'})), msg, rt, body,
      h('section', {class: 'panel', id: 'runtime-config'}, h('h2', {text: 'Container runtime'}), rtForm));
    runtimeForm(api, rtForm);
    let shown = '';
    const cells = new Map();
    const load = async () => {
      let st;
      try {
        st = await api.get('/apps');
      } catch (err) {
        replace(body, errorBox(err));
        shown = '';
        return;
      }
      replace(rt, runtimeLine(st.runtime));
      const apps = st.apps || [];
      const key = structure(apps);
      if (key === shown) {
        refreshCells(apps, cells);
        return;
      }
      shown = key;
      cells.clear();
      if (!apps.length) {
        replace(body, h('p', {class: 'empty', text: 'No app yet. Deploy one from "New app".'}));
        return;
      }
      replace(body, apps.map(a => {
        const appAct = (label, path, done) => h('button', {type: 'button', class: 'secondary', text: label,
          'data-app-action': `${a.appName}/${label.toLowerCase()}`,
          onclick: () => run(msg, async () => {
            await api.post(path, path === '/restart' ? {appId: a.appId} : {});
            status(msg, 'ok', `${a.appName} ${done}.`);
            await load();
          })});
        return h('section', {class: 'panel', 'data-app': a.appName},
          h('div', {class: 'toolbar'},
            h('h2', {}, h('a', {href: `#/apps/${a.appId}`, text: a.appName})),
            h('div', {class: 'row-actions'},
              appAct('Start', `/apps/${a.appId}/start`, 'started'),
              appAct('Stop', `/apps/${a.appId}/stop`, 'stopped'),
              appAct('Restart', '/restart', 'restarted'),
              confirmButton('Delete', () => run(msg, async () => {
                await api.del(`/apps/${a.appId}`);
                status(msg, 'ok', `${a.appName} deleted.`);
                await load();
              })))),
          servicesTable(api, a, msg, load, cells, s => h('a', {class: 'button secondary', text: 'Logs',
            href: `#/apps/${a.appId}?service=${encodeURIComponent(s.serviceName)}`, 'aria-label': `Logs of ${s.serviceName}`})));
      }));
    };
    return every(3000, load);
  },
};
