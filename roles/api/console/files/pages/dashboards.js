// Dashboards: an agent's layouts (docs/dashboards.md) drawn as a CSS
// grid of widgets (widgets.js), fed by the readings API on open and by
// one live stream of the agent after; and an editor whose fields are
// named by the layout's JSON paths, so the API's validation errors
// (layout.widgets[1].w: ...) land on the field they name.
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {qs} from '../../lib/api.js';
import {errorBox} from '../../lib/router.js';
import {field, values, submitting} from '../../lib/form.js';
import {widget, widgetTypes, rowHeight} from './widgets.js';
import {liveReadings, readingName} from './readings-data.js';

const list = {
  path: '/dashboards',
  title: 'Dashboards',
  nav: 'Dashboards',
  async render(ctx) {
    const {root, app} = ctx;
    const [agentsRes, layoutsRes] = await Promise.all([app.api.get('/agents'), app.api.get(`/dashboard-layouts${qs({limit: 200})}`)]);
    const agents = agentsRes.agents || [];
    const names = new Map(agents.map(a => [a.uuid, a.name || a.uuid]));
    const layouts = layoutsRes.layouts || [];
    replace(root, h('h1', {id: 'page-title', text: 'Dashboards'}),
      h('h2', {text: 'Agents'}),
      table([
        {label: 'Agent', value: a => h('a', {href: `#/dashboards/${encodeURIComponent(a.uuid)}`, text: a.name || a.uuid})},
        {label: 'Status', value: a => badge(a.status || 'unknown')},
        {label: 'Layouts', value: a => String(layouts.filter(l => l.deviceUuid === a.uuid).length)},
      ], agents, {empty: 'No agent yet.', caption: 'Open an agent\'s dashboard'}),
      h('h2', {text: 'Saved layouts'}),
      table([
        {label: 'Layout', value: l => h('a', {href: `#/dashboards/${encodeURIComponent(l.deviceUuid)}/${encodeURIComponent(l.id)}`, text: l.name})},
        {label: 'Agent', value: l => names.get(l.deviceUuid) || l.deviceUuid},
        {label: 'Default', value: l => (l.isDefault ? badge('default', 'ok') : '')},
        {label: 'Widgets', value: l => String((l.layout.widgets || []).length)},
        {label: 'Updated', value: l => fmtTime(l.updatedAt)},
      ], layouts, {empty: 'No layout saved yet: an agent\'s dashboard starts from a generated one.'}));
  },
};

const device = {
  path: '/dashboards/:deviceUuid',
  title: 'Dashboard',
  navGroup: 'Dashboards',
  render: (ctx) => dashboard(ctx, null),
};

const layout = {
  path: '/dashboards/:deviceUuid/:layoutId',
  title: 'Dashboard',
  navGroup: 'Dashboards',
  render: (ctx) => dashboard(ctx, ctx.params.layoutId),
};

export default [list, device, layout];

// dashboard shows one layout of the agent: layoutId's, or the default
// (the API generates one when none is saved).
async function dashboard(ctx, layoutId) {
  const {root, app, params} = ctx;
  const dev = params.deviceUuid;
  const enc = encodeURIComponent(dev);
  const [agent, all] = await Promise.all([app.api.get(`/agents/${enc}`), app.api.get(`/dashboard-layouts/${enc}/all`)]);
  const layouts = all.layouts || [];
  let d;
  if (layoutId) {
    d = layouts.find(l => l.id === layoutId);
    if (!d) throw new Error('This layout does not exist (any more).');
  } else {
    d = await app.api.get(`/dashboard-layouts/${enc}`);
  }
  // Admins and members write layouts; any other role reads them.
  const canWrite = app.user && ['admin', 'member'].includes(app.user.role);
  const view = h('div', {id: 'dash-view'});
  const picker = layouts.length > 1 ? h('nav', {class: 'toolbar', 'aria-label': 'Layouts of this agent'},
    layouts.map(l => h('a', {href: `#/dashboards/${enc}/${encodeURIComponent(l.id)}`, class: 'button secondary',
      'aria-current': l.id === d.id ? 'page' : null, text: l.name + (l.isDefault ? ' (default)' : '')}))) : null;
  const live = h('span', {class: 'live', text: 'live'});
  const actions = h('div', {class: 'toolbar'},
    canWrite ? h('button', {type: 'button', id: 'dash-edit', text: d.id ? 'Edit' : 'Edit and save', onclick: () => openEditor(d)}) : null,
    canWrite ? h('button', {type: 'button', class: 'secondary', id: 'dash-new', text: 'New layout', onclick: () => openEditor(null)}) : null,
    canWrite && d.id ? deleteButton() : null);
  replace(root,
    h('p', {class: 'crumbs'}, h('a', {href: '#/dashboards', text: 'Dashboards'}), ' / ',
      h('a', {href: `#/agents/${enc}`, text: agent.name || agent.uuid}), ' / '),
    h('h1', {id: 'page-title', text: `${agent.name || agent.uuid}: ${d.name}`}),
    d.generated ? h('p', {class: 'alert info', role: 'status',
      text: 'A generated layout (one chart per metric); it is not saved. Edit and save it to keep it.'}) : null,
    h('p', {}, live), picker, actions, view);

  // The grid and its live feed; the editor replaces them while open.
  let widgets = [];
  let closeStream = () => {};
  const stopView = () => {
    closeStream();
    closeStream = () => {};
    widgets.forEach(w => w.destroy());
    widgets = [];
  };
  ctx.onCleanup(stopView);
  const showView = async () => {
    stopView();
    actions.hidden = false;
    const cols = d.layout.columns || 12;
    const grid = h('div', {class: 'dash-grid', id: 'dash-grid', 'data-columns': String(cols)});
    grid.style.gridTemplateColumns = `repeat(${cols}, minmax(0, 1fr))`;
    grid.style.gridAutoRows = `${rowHeight}px`;
    widgets = (d.layout.widgets || []).map(w => widget(w, {api: app.api, agent: agent.uuid}));
    widgets.forEach(w => grid.append(w.el));
    replace(view, widgets.length ? grid : h('p', {class: 'empty', text: 'This layout has no widget yet.'}));
    await Promise.all(widgets.map(w => w.load()));
    if (ctx.stale() || !widgets.length) return;
    closeStream = app.stream(`/agents/${enc}/stream`, (event, data) => {
      if (event !== 'metrics') return;
      const rs = liveReadings(data);
      if (rs.length) widgets.forEach(w => w.live(rs));
    }, (state) => { live.dataset.state = state; });
  };

  function deleteButton() {
    const b = h('button', {type: 'button', class: 'danger', id: 'dash-delete', text: 'Delete layout', onclick: async () => {
      // A second press confirms: no modal dialog to trap the keyboard.
      if (b.dataset.armed !== 'yes') {
        b.dataset.armed = 'yes';
        b.textContent = `Really delete ${d.name}?`;
        return;
      }
      try {
        await app.api.del(`/dashboard-layouts/${encodeURIComponent(d.id)}`);
        ctx.navigate(`/dashboards/${enc}`);
      } catch (err) {
        view.prepend(errorBox(err));
      }
    }});
    return b;
  }

  const openEditor = async (from) => {
    stopView();
    actions.hidden = true;
    const cat = await app.api.get(`/readings/catalog${qs({agent_uuid: agent.uuid})}`);
    // A saved layout is shown by its route, drawn afresh (the router
    // renders again when the route is the one shown).
    editor({app, view, agent, from, catalog: cat.metrics || [], onCancel: () => showView(),
      onSaved: (saved) => ctx.navigate(`/dashboards/${enc}/${encodeURIComponent(saved.id)}`)});
  };

  await showView();
}

// editor edits from (a saved or generated layout; null for a new one)
// in view.
function editor({app, view, agent, from, catalog, onCancel, onSaved}) {
  const existing = from && from.id ? from : null;
  const model = {
    name: existing ? existing.name : (from ? from.name : ''),
    isDefault: existing ? existing.isDefault : !from,
    layout: JSON.parse(JSON.stringify(from ? from.layout : {schemaVersion: 1, columns: 12, widgets: []})),
  };
  model.layout.columns = model.layout.columns || 12;
  model.layout.widgets = model.layout.widgets || [];
  const devices = [...new Set(catalog.map(m => m.deviceName).filter(Boolean))].sort();
  const metricsOfDevice = (dev) => catalog.filter(m => m.deviceName === dev).map(m => readingName(dev, m.metricName)).sort();

  const form = h('form', {class: 'stack wide dash-editor', id: 'dash-editor', 'aria-label': 'Layout editor', novalidate: true});
  const status = h('div', {'aria-live': 'polite'});

  // sync reads the form back into the model (before the form is drawn
  // again: adding, removing, or a change of type or device).
  const sync = () => {
    const v = values(form);
    model.name = v.name ?? model.name;
    model.isDefault = !!v.isDefault;
    const lay = v.layout || {};
    model.layout.columns = lay.columns ?? model.layout.columns;
    const before = new Map(model.layout.widgets.map(w => [w.id, w]));
    model.layout.widgets = (lay.widgets || []).map(w => clean(w, before.get(w.id)));
  };

  const draw = (focus) => {
    const ws = model.layout.widgets;
    replace(form,
      h('h2', {text: existing ? `Edit ${existing.name}` : 'New layout'}),
      status,
      h('div', {class: 'toolbar'},
        field({name: 'name', label: 'Name', value: model.name, required: true}),
        field({name: 'layout.columns', label: 'Columns', type: 'number', value: model.layout.columns, min: 1, max: 24}),
        field({name: 'isDefault', label: 'The agent\'s default layout', type: 'checkbox', value: model.isDefault})),
      ws.map((w, i) => widgetFields(w, i)),
      h('div', {class: 'toolbar'},
        h('button', {type: 'button', class: 'secondary', id: 'dash-add', text: 'Add a widget', onclick: () => {
          sync();
          const bottom = Math.max(0, ...model.layout.widgets.map(x => (x.y || 0) + (x.h || 1)));
          const dev0 = devices[0] || '';
          model.layout.widgets.push({id: nextId(model.layout.widgets), type: 'line', title: '', x: 0, y: bottom,
            w: Math.min(6, model.layout.columns), h: 4, source: {deviceName: dev0, metric: metricsOfDevice(dev0)[0] || ''}, options: {}});
          draw(`layout.widgets[${model.layout.widgets.length - 1}].type`);
        }}),
        h('button', {type: 'submit', id: 'dash-save', text: 'Save layout'}),
        h('button', {type: 'button', class: 'secondary', text: 'Cancel', onclick: onCancel})));
    if (focus) {
      const el = form.querySelector(`[data-input="${CSS.escape(focus)}"]`);
      if (el) el.focus();
    }
  };

  const widgetFields = (w, i) => {
    const p = `layout.widgets[${i}]`;
    const dev = (w.source && w.source.deviceName) || '';
    const metrics = metricsOfDevice(dev);
    const metric = (w.source && w.source.metric) ? readingName(dev, w.source.metric) : '';
    if (metric && !metrics.includes(metric)) metrics.unshift(metric);
    const o = w.options || {};
    const opt = (name, label, extra = {}) => field({name: `${p}.options.${name}`, label, value: o[name] ?? '', ...extra});
    const options = [];
    if (w.type === 'line') options.push(opt('window', 'Window', {placeholder: '15m'}), opt('step', 'Step', {placeholder: 'raw'}));
    if (w.type === 'gauge') {
      options.push(opt('min', 'Minimum', {type: 'number', step: 'any', required: true}), opt('max', 'Maximum', {type: 'number', step: 'any', required: true}),
        opt('decimals', 'Decimals', {type: 'number', min: 0, max: 6}));
    }
    if (w.type === 'stat') options.push(opt('decimals', 'Decimals', {type: 'number', min: 0, max: 6}), opt('window', 'Window', {placeholder: '15m'}));
    if (w.type === 'table') options.push(opt('rows', 'Rows', {type: 'number', min: 1, max: 100}));
    options.push(opt('unit', 'Unit'));
    const redraw = () => { sync(); draw(document.activeElement && document.activeElement.dataset.input); };
    const typeField = field({name: `${p}.type`, label: 'Type', type: 'select', value: w.type, options: widgetTypes});
    typeField.querySelector('select').addEventListener('change', redraw);
    const devField = field({name: `${p}.source.deviceName`, label: 'Device', type: 'select', value: dev,
      options: (devices.includes(dev) || !dev ? devices : [dev, ...devices]).map(x => [x, x])});
    devField.querySelector('select').addEventListener('change', () => {
      sync();
      const m = metricsOfDevice(model.layout.widgets[i].source.deviceName);
      model.layout.widgets[i].source.metric = m[0] || '';
      draw(`${p}.source.deviceName`);
    });
    return h('fieldset', {class: 'field widget-fields', 'data-field': p, 'data-widget-index': String(i)},
      h('legend', {text: `Widget ${i + 1}${w.title ? ': ' + w.title : ''}`}),
      h('small', {class: 'field-error', role: 'alert', hidden: true}),
      h('div', {class: 'toolbar'},
        typeField,
        field({name: `${p}.title`, label: 'Title', value: w.title || ''}),
        devField,
        field({name: `${p}.source.metric`, label: 'Metric', type: 'select', value: metric, options: metrics.map(x => [x, x])})),
      h('div', {class: 'toolbar'},
        ['x', 'y', 'w', 'h'].map(k => field({name: `${p}.${k}`, label: {x: 'Column (x)', y: 'Row (y)', w: 'Width', h: 'Height'}[k],
          type: 'number', value: w[k], min: k === 'w' || k === 'h' ? 1 : 0})),
        options),
      h('input', {type: 'hidden', 'data-input': `${p}.id`, value: w.id}),
      h('button', {type: 'button', class: 'secondary', text: `Remove widget ${i + 1}`, onclick: () => {
        sync();
        model.layout.widgets.splice(i, 1);
        draw();
      }}));
  };

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    sync();
    const body = {name: model.name.trim(), isDefault: model.isDefault,
      layout: {schemaVersion: 1, columns: model.layout.columns, widgets: model.layout.widgets}};
    submitting(form, async () => {
      let saved;
      try {
        saved = existing ?
          await app.api.put(`/dashboard-layouts/${encodeURIComponent(existing.id)}`, {...body, version: existing.version}) :
          await app.api.post(`/dashboard-layouts/${encodeURIComponent(agent.uuid)}`, body);
      } catch (err) {
        if (err.code !== 'version_conflict') throw err;
        const current = err.body && err.body.error && err.body.error.currentVersion;
        replace(status, h('div', {class: 'alert error', role: 'alert', id: 'dash-conflict'},
          `Someone else saved this layout meanwhile${current ? ` (it is now at version ${current})` : ''}; saving would undo their change. `,
          h('button', {type: 'button', class: 'secondary', text: 'Reload their version', onclick: async () => {
            const fresh = await app.api.get(`/dashboard-layouts/${encodeURIComponent(agent.uuid)}/all`);
            const l = (fresh.layouts || []).find(x => x.id === existing.id);
            if (l) onSaved(l);
          }})));
        return;
      }
      onSaved(saved);
    });
  });
  draw('name');
  replace(view, form);
}

// clean drops the empty option fields the form sends (the API refuses
// an empty option), and keeps a table's list of metrics, which the form
// does not edit, while the widget stays a table.
function clean(w, before) {
  const o = {};
  for (const [k, v] of Object.entries(w.options || {})) {
    if (v === '' || v === null || v === undefined) continue;
    o[k] = typeof v === 'string' ? v.trim() : v;
  }
  const out = {...w, options: o};
  if (!out.title) delete out.title;
  if (before && w.type === 'table' && before.source && Array.isArray(before.source.metrics) && before.source.metrics.length) {
    out.source = {deviceName: w.source.deviceName, metrics: before.source.metrics};
  }
  return out;
}

// nextId finds an id no widget has: w1, w2, ...
function nextId(ws) {
  const used = new Set(ws.map(w => w.id));
  let n = ws.length + 1;
  while (used.has(`w${n}`)) n++;
  return `w${n}`;
}
