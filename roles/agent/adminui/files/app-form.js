// The app form and the service fields it shares with the app page's
// service forms. Inputs are named by the API's JSON paths
// (services[0].config.ports), so a 400 shows by the field it names
// (services[0].config.ports[1] falls back to the ports box). Lists are
// one item a line; the environment is KEY=value a line. The form checks
// nothing the API checks: only that each environment line has its "=".
import {h, replace} from '../lib/dom.js';
import {field, values, submitting, showErrors} from '../lib/form.js';

const restarts = ['unless-stopped', 'always', 'on-failure', 'no'].map(r => [r, r]);
const states = [['running', 'running'], ['stopped', 'stopped']];

// raw is a service as the form holds it: the lists as text.
export function raw(s = {}) {
  const c = s.config || {};
  return {
    serviceName: s.serviceName ?? '',
    imageName: s.imageName ?? '',
    state: s.state === 'stopped' || s.target === 'stopped' ? 'stopped' : 'running',
    config: {
      restart: c.restart || 'unless-stopped',
      ports: (c.ports || []).join('\n'),
      environment: Object.entries(c.environment || {}).map(([k, v]) => `${k}=${v}`).join('\n'),
      volumes: (c.volumes || []).join('\n'),
    },
  };
}

// serviceFields are the inputs of one service under prefix ('' for a
// body that is the service, 'services[0].' in the app form). With
// fixedName the name is shown but not sent (the path names it).
export function serviceFields(prefix, r, {fixedName = false} = {}) {
  const c = r.config || {};
  const name = field({name: `${prefix}serviceName`, label: 'Service name', value: r.serviceName, required: true,
    help: 'a-z, 0-9, "_", "." and "-".'});
  if (fixedName) name.querySelector('input').disabled = true;
  return [
    h('div', {class: 'grid2'},
      name,
      field({name: `${prefix}imageName`, label: 'Image', value: r.imageName, required: true, placeholder: 'nginx:1.27'}),
      field({name: `${prefix}state`, label: 'State', type: 'select', options: states, value: r.state}),
      field({name: `${prefix}config.restart`, label: 'Restart', type: 'select', options: restarts, value: c.restart})),
    h('div', {class: 'grid2'},
      field({name: `${prefix}config.ports`, label: 'Ports', type: 'textarea', rows: 3, value: c.ports,
        placeholder: '8080:80', help: 'host:container[/udp] or ip:host:container, one a line.'}),
      field({name: `${prefix}config.environment`, label: 'Environment', type: 'textarea', rows: 3, value: c.environment,
        placeholder: 'LOG_LEVEL=info', help: 'KEY=value, one a line.'}),
      field({name: `${prefix}config.volumes`, label: 'Volumes', type: 'textarea', rows: 3, value: c.volumes,
        placeholder: 'data:/var/lib/app', help: 'name:/path or /host/path:/path, :ro to read only; one a line.'})),
  ];
}

function lines(s) {
  return String(s || '').split(/\r?\n/).map(x => x.trim()).filter(Boolean);
}

// service turns the raw values of one service into the API's object;
// problems (an environment line without "=") go to errors by field.
export function service(prefix, r, errors) {
  const c = (r && r.config) || {};
  const env = {};
  String(c.environment || '').split(/\r?\n/).forEach((line, i) => {
    if (!line.trim()) return;
    const eq = line.indexOf('=');
    if (eq <= 0) {
      errors.push({field: `${prefix}config.environment`, message: `line ${i + 1}: write KEY=value`});
      return;
    }
    env[line.slice(0, eq).trim()] = line.slice(eq + 1);
  });
  const out = {imageName: (r.imageName || '').trim(), state: r.state || 'running', config: {restart: c.restart || 'unless-stopped'}};
  if (r.serviceName !== undefined) out.serviceName = r.serviceName.trim();
  const ports = lines(c.ports);
  const volumes = lines(c.volumes);
  if (ports.length) out.config.ports = ports;
  if (volumes.length) out.config.volumes = volumes;
  if (Object.keys(env).length) out.config.environment = env;
  return out;
}

// serviceForm renders a form of one service (new, or the one s names
// with fixedName) and calls save(body) on submit.
export function serviceForm(id, s, {fixedName = false, submitLabel, save}) {
  const form = h('form', {class: 'stack wide', id, novalidate: true},
    serviceFields('', raw(s), {fixedName}),
    h('div', {class: 'row-actions'}, h('button', {type: 'submit', text: submitLabel})));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const errors = [];
    const body = service('', values(form), errors);
    if (fixedName) delete body.serviceName;
    if (errors.length) {
      showErrors(form, errors);
      return;
    }
    await submitting(form, () => save(body));
  });
  return form;
}

// appForm renders the new app form into el and calls save(body) on
// submit; save's ApiError shows by the fields.
export function appForm(el, {save}) {
  let rows = [raw({})];
  const list = h('div', {class: 'points', id: 'app-services'});
  const read = () => {
    const v = values(form).services || [];
    rows = rows.map((_, i) => v[i] || raw({}));
  };
  const draw = () => {
    replace(list, rows.map((r, i) => h('fieldset', {class: 'service', 'data-row': String(i)},
      h('legend', {text: `Service ${i + 1}`}),
      serviceFields(`services[${i}].`, r),
      rows.length > 1 ? h('button', {type: 'button', class: 'secondary', text: 'Remove', 'aria-label': `Remove service ${i + 1}`,
        onclick: () => { read(); rows.splice(i, 1); draw(); }}) : null)));
  };
  const form = h('form', {class: 'stack wide', id: 'app-form', novalidate: true},
    field({name: 'appName', label: 'App name', required: true, help: 'Unique on this agent; no "/".'}),
    h('div', {class: 'field', 'data-field': 'services'}, h('small', {class: 'field-error', role: 'alert', hidden: true})),
    list,
    h('button', {type: 'button', class: 'secondary', id: 'add-service', text: 'Add service',
      onclick: () => { read(); rows.push(raw({})); draw(); list.lastChild.querySelector('input').focus(); }}),
    h('div', {class: 'row-actions'},
      h('button', {type: 'submit', id: 'deploy-app', text: 'Deploy'}),
      h('a', {class: 'button secondary', href: '#/apps', text: 'Cancel'})));
  draw();
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = values(form);
    const errors = [];
    const body = {appName: v.appName.trim(), services: (v.services || []).map((r, i) => service(`services[${i}].`, r, errors))};
    if (errors.length) {
      showErrors(form, errors);
      return;
    }
    await submitting(form, () => save(body));
  });
  replace(el, form);
  return form;
}
