// One app: its services with their state (refreshed every 3 s in place)
// and actions, a service's edit form (a new image, ports or environment
// recreates its container blue-green), a new service, purge and delete,
// and the live log of one service (?service=, the first by default).
import {h, replace} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, confirmButton, run, status} from '../util.js';
import {servicesTable, runtimeLine, structure, refreshCells, logView} from '../app-view.js';
import {serviceForm} from '../app-form.js';

const enc = encodeURIComponent;

export default {
  path: '/apps/:appId',
  title: 'App',
  navGroup: 'Apps',
  render(ctx) {
    const {api} = ctx.app;
    const id = ctx.params.appId;
    const head = h('div', {}, heading('App'));
    const msg = h('div', {id: 'app-status'});
    const rt = h('div');
    const table = h('div', {id: 'app-services'});
    const edit = h('section', {class: 'panel', id: 'service-edit', hidden: true});
    const logs = h('section', {class: 'panel', id: 'app-logs'});
    const adding = h('div');
    replace(ctx.root, head, msg, rt, table, edit,
      h('details', {class: 'panel', id: 'add-service-panel'}, h('summary', {text: 'Add a service'}), adding), logs);

    let shown = '';
    let app = null;
    let logStop = null;
    let logService = ctx.query.get('service') || '';
    const cells = new Map();
    const stopLog = () => {
      if (logStop) logStop();
      logStop = null;
    };
    ctx.onCleanup(stopLog);

    const showLog = (name) => {
      stopLog();
      logService = name;
      const v = logView(id, name);
      logStop = v.stop;
      replace(logs, h('h2', {text: `Log of ${name}`}), v.el);
    };

    const showEdit = (s) => {
      edit.hidden = false;
      replace(edit, h('h2', {text: `Edit ${s.serviceName}`}),
        serviceForm('service-form', s, {fixedName: true, submitLabel: 'Save and recreate', save: async (body) => {
          await api.put(`/apps/${id}/services/${enc(s.serviceName)}`, body);
          edit.hidden = true;
          replace(edit);
          status(msg, 'ok', `${s.serviceName} saved; its container is recreated if its image, ports, environment or volumes changed.`);
          shown = '';
          await load();
        }}));
      edit.querySelector('[data-input="imageName"]').focus();
    };

    const drawHead = (a) => {
      const act = (label, fn, done) => h('button', {type: 'button', class: 'secondary', text: label,
        'data-app-action': label.toLowerCase(),
        onclick: () => run(msg, async () => {
          await fn();
          status(msg, 'ok', `${a.appName} ${done}.`);
          await load();
        })});
      replace(head, heading(`App ${a.appName}`,
        h('div', {class: 'row-actions'},
          act('Start', () => api.post(`/apps/${id}/start`), 'started'),
          act('Stop', () => api.post(`/apps/${id}/stop`), 'stopped'),
          act('Restart', () => api.post('/restart', {appId: a.appId}), 'restarted'),
          confirmButton('Purge volumes', () => run(msg, async () => {
            await api.post('/purge', {appId: a.appId, force: true});
            status(msg, 'ok', `${a.appName}: volumes removed.`);
          }), {confirmLabel: 'Confirm: stop and remove its volumes'}),
          confirmButton('Delete', () => run(msg, async () => {
            await api.del(`/apps/${id}`);
            ctx.navigate('/apps');
          })),
          h('a', {class: 'button secondary', href: '#/apps', text: 'All apps'}))));
    };

    const load = async () => {
      let st;
      try {
        st = await api.get('/apps');
      } catch (err) {
        replace(table, errorBox(err));
        shown = '';
        return;
      }
      replace(rt, runtimeLine(st.runtime));
      app = (st.apps || []).find(a => String(a.appId) === id);
      if (!app) {
        replace(table, errorBox(new Error(`App ${id} not found.`)));
        shown = '';
        return;
      }
      const key = structure([app]);
      if (key === shown) {
        refreshCells([app], cells);
        return;
      }
      if (!shown) drawHead(app);
      shown = key;
      cells.clear();
      replace(table, servicesTable(api, app, msg, load, cells, s => [
        h('button', {type: 'button', class: 'secondary', text: 'Edit', 'data-edit': s.serviceName,
          'aria-label': `Edit ${s.serviceName}`, onclick: () => showEdit(s)}),
        h('button', {type: 'button', class: 'secondary', text: 'Logs', 'data-logs': s.serviceName,
          'aria-label': `Logs of ${s.serviceName}`, onclick: () => showLog(s.serviceName)}),
        confirmButton('Remove', () => run(msg, async () => {
          await api.del(`/apps/${id}/services/${enc(s.serviceName)}`);
          status(msg, 'ok', `${s.serviceName} removed.`);
          if (logService === s.serviceName) stopLog();
          await load();
        })),
      ]));
      const names = (app.services || []).map(s => s.serviceName);
      if (!logStop && names.length) showLog(names.includes(logService) ? logService : names[0]);
    };

    replace(adding, serviceForm('add-service-form', {}, {submitLabel: 'Add service', save: async (body) => {
      const s = await api.post(`/apps/${id}/services`, body);
      status(msg, 'ok', `${s.serviceName} added.`);
      await load();
    }}));
    return every(3000, load);
  },
};
