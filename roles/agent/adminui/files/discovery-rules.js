// Discovery rules on the discovery page (docs/discovery.md, "Rules"):
// the list with its actions, one form that creates or edits a rule, a
// rule's runs and the recent runs of every rule. The agent validates;
// its errors show by the field they name (params_json.ports[0] lands on
// the options box).
import {h, replace, badge, table} from '../lib/dom.js';
import {field, values, submitting, showErrors} from '../lib/form.js';
import {errorBox} from '../lib/router.js';
import {status, confirmButton, run} from './util.js';
import {runsTable, devicesTable} from './discovery-devices.js';

export const scanners = [['modbus', 'Modbus TCP'], ['opcua', 'OPC-UA'], ['mqtt', 'MQTT'], ['bacnet', 'BACnet/IP']];

const paramsHint = {
  modbus: '{"network": "192.168.10.0/24", "ports": [502], "unitIds": [1]}',
  opcua: '{"endpointUrls": ["opc.tcp://plc.local:4840"]}',
  mqtt: '{"brokerUrl": "tcp://192.168.10.20:1883", "topics": ["plant/#"]}',
  bacnet: '{"broadcastAddress": "192.168.1.255:47808"}',
};

function fmtInterval(seconds) {
  if (seconds % 86400 === 0) return `${seconds / 86400} d`;
  if (seconds % 3600 === 0) return `${seconds / 3600} h`;
  if (seconds % 60 === 0) return `${seconds / 60} min`;
  return `${seconds} s`;
}

function json(v) {
  return v === null || v === undefined ? '' : JSON.stringify(v, null, 2);
}

// readJSON parses a box of the rule form: blank is null, which clears
// the value; what does not parse shows by the box.
function readJSON(form, name, text) {
  if (!text.trim()) return {ok: true, v: null};
  try {
    return {ok: true, v: JSON.parse(text)};
  } catch (err) {
    showErrors(form, [{field: name, message: `not JSON: ${err.message}`}]);
    return {ok: false};
  }
}

// ruleForm creates a rule, or edits rule when given; onDone runs after a
// save or a cancel.
function ruleForm(api, rule, onDone) {
  const r = rule || {interval_seconds: 3600, enabled: true, auto_enable: false, protocol: 'modbus'};
  const params = field({name: 'params_json', label: 'Scan options (JSON object)', type: 'textarea', rows: 3,
    value: json(r.params_json), placeholder: paramsHint[r.protocol],
    help: 'The scanner\'s options, as in a scan; blank scans the targets of the configured endpoints.'});
  const form = h('form', {class: 'stack wide', id: 'rule-form', 'data-editing': rule ? rule.uuid : '', novalidate: true},
    h('h3', {text: rule ? `Edit rule ${rule.name}` : 'New rule'}),
    h('div', {class: 'grid2'},
      field({name: 'name', label: 'Name', value: r.name ?? '', required: true}),
      field({name: 'protocol', label: 'Protocol', type: 'select', value: r.protocol, options: scanners}),
      field({name: 'interval_seconds', label: 'Run every (s)', type: 'number', value: r.interval_seconds, min: 60,
        help: '60 to 604800 (a week).'})),
    field({name: 'enabled', label: 'Run on schedule', type: 'checkbox', value: r.enabled}),
    field({name: 'auto_enable', label: 'Create an endpoint for each new device', type: 'checkbox', value: r.auto_enable}),
    params,
    field({name: 'target_json', label: 'Endpoint template (JSON object)', type: 'textarea', rows: 3, value: json(r.target_json),
      placeholder: '{"poll_interval": 1000, "data_points": [{"name": "value", "register": "holding:0"}]}',
      help: 'What created endpoints get besides the device\'s name and connection; "name" is a prefix.'}),
    h('div', {class: 'row-actions'},
      h('button', {type: 'submit', id: 'save-rule', text: rule ? 'Save rule' : 'Create rule'}),
      rule ? h('button', {type: 'button', class: 'secondary', text: 'Cancel', onclick: () => onDone(null)}) : null));
  form.querySelector('[data-input="protocol"]').addEventListener('change', (e) => {
    params.querySelector('textarea').placeholder = paramsHint[e.target.value] || '';
  });
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const v = values(form);
    const p = readJSON(form, 'params_json', v.params_json);
    const t = p.ok && readJSON(form, 'target_json', v.target_json);
    if (!p.ok || !t.ok) return;
    const body = {name: v.name, protocol: v.protocol, enabled: v.enabled, auto_enable: v.auto_enable,
      params_json: p.v, target_json: t.v};
    if (v.interval_seconds !== undefined) body.interval_seconds = v.interval_seconds;
    const saved = await submitting(form, () => rule
      ? api.patch(`/discovery-rules/${encodeURIComponent(rule.uuid)}`, body)
      : api.post('/discovery-rules', body));
    if (saved) onDone(saved);
  });
  return form;
}

// rulesSection builds the rules part of the page: its elements, and
// loaders of the rules and of the recent runs (which the page polls).
export function rulesSection(api) {
  const msg = h('div', {id: 'rules-status', 'aria-live': 'polite'});
  const list = h('div', {id: 'discovery-rules'});
  const formHolder = h('div', {id: 'rule-form-holder'});
  const ruleRuns = h('div', {id: 'rule-runs', 'aria-live': 'polite'});
  const recent = h('div', {id: 'discovery-runs'});
  let rules = [];
  const nameOf = (uuid) => (rules.find(r => r.uuid === uuid) || {}).name;

  const showForm = (rule) => {
    replace(formHolder, ruleForm(api, rule, async (saved) => {
      if (saved) status(msg, 'ok', rule ? `Rule ${saved.name} saved.` : `Rule ${saved.name} created.`);
      showForm(null);
      await loadRules();
    }));
    if (rule) formHolder.querySelector('[data-input="name"]').focus();
  };

  const showRuns = async (r, latest) => {
    try {
      const {runs} = await api.get(`/discovery-rules/${encodeURIComponent(r.uuid)}/runs`);
      replace(ruleRuns, h('section', {class: 'card', 'data-runs-of': r.name},
        h('div', {class: 'toolbar'}, h('h3', {text: `Runs of ${r.name}`}),
          h('button', {type: 'button', class: 'secondary', text: 'Close', onclick: () => replace(ruleRuns)})),
        latest && (latest.devices || []).length
          ? [h('p', {text: 'Devices the last run found:'}), devicesTable(latest.devices)] : null,
        runsTable(runs, () => r.name)));
    } catch (err) {
      replace(ruleRuns, errorBox(err));
    }
  };

  const actions = (r) => h('div', {class: 'row-actions', 'data-rule-actions': r.name},
    h('button', {type: 'button', 'data-action': 'run', text: 'Run now', 'aria-label': `Run ${r.name} now`, onclick: async (e) => {
      const b = e.currentTarget;
      b.disabled = true;
      status(msg, 'info', `Running ${r.name}…`);
      const done = await run(msg, () => api.post(`/discovery-rules/${encodeURIComponent(r.uuid)}/run`));
      b.disabled = false;
      if (done) {
        status(msg, done.status === 'failed' ? 'error' : 'ok', `Run of ${r.name}: ${done.status}, ${done.devices_found} devices found, ` +
          `${done.endpoints_created} endpoints created${done.error ? `: ${done.error}` : '.'}`);
        await Promise.all([showRuns(r, done), loadRecent()]);
      }
    }}),
    h('button', {type: 'button', class: 'secondary', 'data-action': 'runs', text: 'Runs', 'aria-label': `Runs of ${r.name}`,
      onclick: () => showRuns(r)}),
    h('button', {type: 'button', class: 'secondary', 'data-action': 'edit', text: 'Edit', 'aria-label': `Edit ${r.name}`,
      onclick: () => showForm(r)}),
    h('button', {type: 'button', class: 'secondary', 'data-action': 'toggle', text: r.enabled ? 'Disable' : 'Enable',
      onclick: () => run(msg, async () => {
        await api.patch(`/discovery-rules/${encodeURIComponent(r.uuid)}`, {enabled: !r.enabled});
        status(msg, 'ok', `${r.name} ${r.enabled ? 'disabled' : 'enabled'}.`);
        await loadRules();
      })}),
    confirmButton('Delete', () => run(msg, async () => {
      await api.del(`/discovery-rules/${encodeURIComponent(r.uuid)}`);
      status(msg, 'ok', `${r.name} and its runs deleted.`);
      if (ruleRuns.querySelector(`[data-runs-of="${CSS.escape(r.name)}"]`)) replace(ruleRuns);
      await Promise.all([loadRules(), loadRecent()]);
    })));

  const loadRules = async () => {
    try {
      rules = (await api.get('/discovery-rules')).rules || [];
    } catch (err) {
      replace(list, errorBox(err));
      return;
    }
    replace(list, table([
      {label: 'Name', value: r => h('span', {'data-rule': r.name, text: r.name})},
      {label: 'Protocol', value: r => r.protocol},
      {label: 'Every', value: r => fmtInterval(r.interval_seconds)},
      {label: 'Schedule', value: r => r.enabled ? badge('on', 'online') : badge('off', 'stopped')},
      {label: 'Creates endpoints', value: r => r.auto_enable ? 'yes' : 'no'},
      {label: 'Options', value: r => h('span', {class: 'mono', text: r.params_json ? JSON.stringify(r.params_json) : 'configured endpoints'})},
      {label: 'Actions', value: actions},
    ], rules, {empty: 'No rule yet.'}));
  };

  const loadRecent = async () => {
    try {
      const {runs} = await api.get('/discovery-runs');
      replace(recent, runsTable(runs, nameOf, {empty: 'No rule has run yet.'}));
    } catch (err) {
      replace(recent, errorBox(err));
    }
  };

  showForm(null);
  const els = [h('h2', {text: 'Rules'}),
    h('p', {class: 'muted', text: 'A rule scans on a schedule and may create an endpoint for each device no endpoint reaches yet.'}),
    msg, list, ruleRuns, formHolder,
    h('h2', {text: 'Recent runs'}), recent];
  return {els, loadRules, loadRecent};
}
