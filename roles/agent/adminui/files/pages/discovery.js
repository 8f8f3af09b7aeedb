// Discovery: scan the network for devices (POST /v1/discover, nothing
// stored), add a device found as an endpoint in one click, and manage
// the discovery rules and their runs (docs/discovery.md). Inputs are
// named by the request's paths (overrides.modbus.ports), so the agent's
// 400s land by their field; a scan of the same protocols moments ago is
// a 409 shown by the forceRun toggle.
import {h, replace} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {every} from '../../lib/sse.js';
import {heading, status, linesToList, run} from '../util.js';
import {devicesTable} from '../discovery-devices.js';
import {rulesSection, scanners} from '../discovery-rules.js';

// Each scanner's options the form offers (the rest keep their
// defaults). kind 'lines': one item per line or comma; 'numbers': the
// same, read as integers where they are.
const options = {
  modbus: [
    {name: 'network', label: 'Network (CIDR)', placeholder: '192.168.10.0/24', help: 'At most 256 addresses.'},
    {name: 'hosts', label: 'Hosts (one per line)', type: 'textarea', rows: 2, kind: 'lines'},
    {name: 'ports', label: 'Ports', placeholder: '502', kind: 'numbers', help: 'Comma-separated, at most 8.'},
    {name: 'unitIds', label: 'Unit ids', placeholder: '1', kind: 'numbers', help: 'Comma-separated, at most 16.'},
  ],
  opcua: [
    {name: 'hosts', label: 'Hosts (one per line)', type: 'textarea', rows: 2, kind: 'lines', help: 'Asked on port 4840.'},
    {name: 'endpointUrls', label: 'Endpoint URLs (one per line)', type: 'textarea', rows: 2, kind: 'lines',
      placeholder: 'opc.tcp://plc.local:4840'},
  ],
  mqtt: [
    {name: 'brokerUrl', label: 'Broker URL', placeholder: 'tcp://192.168.10.20:1883'},
    {name: 'topics', label: 'Topic filters (one per line)', type: 'textarea', rows: 2, kind: 'lines', placeholder: '#'},
    {name: 'durationMs', label: 'Listen for (ms)', type: 'number', placeholder: '5000', min: 100, max: 60000},
  ],
  bacnet: [
    {name: 'target', label: 'Target (host or host:port)', help: 'A Who-Is to one address instead of a broadcast.'},
    {name: 'broadcastAddress', label: 'Broadcast address', placeholder: '255.255.255.255:47808'},
    {name: 'windowMs', label: 'Collect I-Ams for (ms)', type: 'number', placeholder: '3000', min: 100, max: 30000},
  ],
};

function read(spec, v) {
  if (spec.kind === 'lines') return linesToList(v);
  if (spec.kind === 'numbers') return linesToList(v).map(x => /^-?\d+$/.test(x) ? Number(x) : x);
  return typeof v === 'string' ? v.trim() : v;
}

// overridesOf keeps the set options of the protocols scanned; a
// protocol with none scans its configured endpoints' targets.
function overridesOf(v, protocols) {
  const out = {};
  for (const p of protocols) {
    const o = {};
    for (const s of options[p]) {
      const raw = ((v.overrides || {})[p] || {})[s.name];
      if (raw === undefined) continue;
      const x = read(s, raw);
      if (x === '' || (Array.isArray(x) && !x.length)) continue;
      o[s.name] = x;
    }
    if (Object.keys(o).length) out[p] = o;
  }
  return out;
}

function scanForm(api, ctx, resultEl) {
  const running = h('div', {id: 'scan-status', 'aria-live': 'polite'});
  const boxes = scanners.map(([p, label]) => h('div', {class: 'field check'},
    h('input', {type: 'checkbox', id: `scan-${p}`, 'data-protocol': p,
      onchange: (e) => { groups[p].hidden = !e.target.checked; }}),
    h('label', {for: `scan-${p}`, text: label})));
  // The error slot of "protocols" (and protocols[i]) for showErrors.
  const protocolsField = h('fieldset', {class: 'field', 'data-field': 'protocols', tabindex: '-1'},
    h('legend', {text: 'Protocols'}), h('div', {class: 'filters'}, boxes),
    h('small', {class: 'help', text: 'None ticked: the protocols of the configured endpoints.'}),
    h('small', {class: 'field-error', role: 'alert', hidden: true}));
  const groups = Object.fromEntries(scanners.map(([p, label]) => [p, h('fieldset', {'data-options': p, hidden: true},
    h('legend', {text: `${label} options`}),
    h('div', {class: 'grid2'}, options[p].map(s => field({...s, name: `overrides.${p}.${s.name}`}))))]));
  const form = h('form', {class: 'stack wide', id: 'discover-form', novalidate: true},
    protocolsField, scanners.map(([p]) => groups[p]),
    h('div', {class: 'filters'},
      field({name: 'validate', label: 'Probe each device found once more', type: 'checkbox'}),
      field({name: 'forceRun', label: 'Scan again within 30 s of the last scan', type: 'checkbox'})),
    h('button', {type: 'submit', id: 'scan', text: 'Scan'}));

  let ctrl = null;
  ctx.onCleanup(() => { if (ctrl) ctrl.abort(); });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = values(form);
    const protocols = boxes.map(b => b.querySelector('input')).filter(i => i.checked).map(i => i.dataset.protocol);
    const body = {validate: v.validate, forceRun: v.forceRun};
    if (protocols.length) body.protocols = protocols;
    const ov = overridesOf(v, protocols);
    if (Object.keys(ov).length) body.overrides = ov;
    const started = Date.now();
    const what = protocols.length ? protocols.join(', ') : 'the configured endpoints\' protocols';
    const tick = () => status(running, 'info', `Scanning ${what}… ${Math.round((Date.now() - started) / 1000)} s`);
    tick();
    running.setAttribute('aria-busy', 'true');
    const timer = setInterval(tick, 1000);
    ctrl = new AbortController();
    const res = await submitting(form, async () => {
      try {
        return await api.post('/discover', body, {signal: ctrl.signal});
      } catch (err) {
        // The recent-scan guard names forceRun in its message: show it there.
        if (err.status === 409 && /forceRun/.test(err.message)) err.fields = [{field: 'forceRun', message: err.message}];
        throw err;
      }
    });
    clearInterval(timer);
    running.removeAttribute('aria-busy');
    ctrl = null;
    if (!res) {
      replace(running);
      return;
    }
    const secs = ((Date.now() - started) / 1000).toFixed(1);
    const devs = res.devices || [];
    const errs = Object.entries(res.errors || {});
    status(running, errs.length ? 'error' : 'ok', `Scan finished in ${secs} s: ${devs.length} devices` +
      (errs.length ? `; ${errs.length} protocols failed.` : '.'));
    replace(resultEl,
      errs.map(([p, m]) => h('div', {class: 'alert error', role: 'alert', 'data-scan-error': p, text: `${p}: ${m}`})),
      devicesTable(devs, {validated: body.validate, empty: 'The scan found no device.'}));
  });
  return [running, form];
}

// featureNote says when features.discovery is off, with a switch.
async function featureNote(api, el) {
  let s;
  try {
    s = (await api.get('/settings')).settings || {};
  } catch {
    return; // the scan's own error says more
  }
  if ((s.features || {}).discovery !== false) {
    replace(el);
    return;
  }
  replace(el, h('div', {class: 'alert info', role: 'status'},
    'Discovery is off (setting features.discovery): scans and rules answer 409 and no rule runs. ',
    h('button', {type: 'button', class: 'secondary', id: 'discovery-on', text: 'Turn discovery on', onclick: () =>
      run(el, () => api.patch('/settings', {features: {discovery: true}}), 'Discovery is on.')})));
}

export default {
  path: '/discovery',
  title: 'Discovery',
  nav: 'Discovery',
  async render(ctx) {
    const {api} = ctx.app;
    const note = h('div', {id: 'discovery-feature'});
    const resultEl = h('div', {id: 'discovery-devices'}, h('p', {class: 'empty', text: 'Scan to list the devices that answer.'}));
    const rules = rulesSection(api);
    replace(ctx.root, heading('Discovery'), note,
      h('p', {class: 'muted', text: 'A scan lists what answers; nothing is stored until you add a device as an endpoint.'}),
      h('h2', {text: 'Scan now'}), ...scanForm(api, ctx, resultEl),
      h('h2', {text: 'Devices found'}), resultEl,
      ...rules.els);
    await Promise.all([featureNote(api, note), rules.loadRules()]);
    if (ctx.stale()) return undefined;
    return every(10000, rules.loadRecent);
  },
};
