// The endpoint form shared by the new and edit pages: common settings,
// the protocol's connection keys and its data points as editable rows
// (roles/agent/adapters/*/README.md are the references). Inputs are named
// by the API's JSON paths, so its validation errors land by their field;
// the form validates nothing itself.
import {h, replace} from '../lib/dom.js';
import {field, values, submitting, showErrors} from '../lib/form.js';
import {linesToList} from './util.js';

const orders = [['', 'default'], ['big', 'big'], ['little', 'little']];

// Each protocol's connection keys: spec for field() plus a kind for
// reading it back ('lines': one item per line, 'escaped': backslash
// escapes such as \n).
const connections = {
  modbus: [
    {name: 'transport', label: 'Transport', type: 'select', options: [['tcp', 'TCP'], ['rtu', 'RTU (serial)']], def: 'tcp'},
    {name: 'host', label: 'Host', placeholder: '192.168.10.21', help: 'TCP: device or gateway address.'},
    {name: 'port', label: 'Port', type: 'number', def: 502},
    {name: 'unitId', label: 'Unit id', type: 'number', def: 1},
    {name: 'timeoutMs', label: 'Time-out (ms)', type: 'number', placeholder: '1000'},
    {name: 'serialPort', label: 'Serial port', placeholder: '/dev/ttyUSB0', help: 'RTU only.'},
    {name: 'baudRate', label: 'Baud rate', type: 'number', placeholder: '9600', more: true},
    {name: 'dataBits', label: 'Data bits', type: 'number', placeholder: '8', more: true},
    {name: 'parity', label: 'Parity', type: 'select', options: [['', 'default (E)'], ['N', 'none'], ['E', 'even'], ['O', 'odd']], more: true},
    {name: 'stopBits', label: 'Stop bits', type: 'number', placeholder: '1', more: true},
    {name: 'byteOrder', label: 'Byte order', type: 'select', options: orders, more: true},
    {name: 'wordOrder', label: 'Word order', type: 'select', options: orders, more: true},
    {name: 'maxGap', label: 'Max gap', type: 'number', placeholder: '16', more: true},
    {name: 'maxCount', label: 'Max registers per request', type: 'number', placeholder: '125', more: true},
    {name: 'maxBitCount', label: 'Max bits per request', type: 'number', placeholder: '2000', more: true},
  ],
  opcua: [
    {name: 'endpointUrl', label: 'Endpoint URL', placeholder: 'opc.tcp://plc.local:4840'},
    {name: 'securityMode', label: 'Security mode', type: 'select', options: [['None', 'None'], ['Sign', 'Sign'], ['SignAndEncrypt', 'Sign and encrypt']], def: 'None'},
    {name: 'securityPolicy', label: 'Security policy', type: 'select', options: [['', 'default'], ['None', 'None'], ['Basic128Rsa15', 'Basic128Rsa15'],
      ['Basic256', 'Basic256'], ['Basic256Sha256', 'Basic256Sha256'], ['Aes128_Sha256_RsaOaep', 'Aes128_Sha256_RsaOaep'], ['Aes256_Sha256_RsaPss', 'Aes256_Sha256_RsaPss']]},
    {name: 'username', label: 'User name', autocomplete: 'off'},
    {name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password'},
    {name: 'subscribe', label: 'Monitored items instead of polling', type: 'checkbox'},
    {name: 'timeoutMs', label: 'Time-out (ms)', type: 'number', placeholder: '5000'},
    {name: 'certificateTrustMode', label: 'Certificate trust', type: 'select', options: [['trust-all', 'trust all'], ['trusted-list', 'trusted list']], def: 'trust-all', more: true},
    {name: 'trustedCertificates', label: 'Trusted certificates (one PEM or path per line)', type: 'textarea', kind: 'lines', more: true},
    {name: 'certFile', label: 'Client certificate file', more: true},
    {name: 'keyFile', label: 'Client key file', more: true},
    {name: 'publishingIntervalMs', label: 'Publishing interval (ms)', type: 'number', placeholder: '1000', more: true},
    {name: 'samplingIntervalMs', label: 'Sampling interval (ms)', type: 'number', placeholder: '0', more: true},
  ],
  mqtt: [
    {name: 'brokerUrl', label: 'Broker URL', placeholder: 'tcp://192.168.10.20:1883'},
    {name: 'topics', label: 'Topics (one filter per line)', type: 'textarea', kind: 'lines', rows: 3},
    {name: 'qos', label: 'QoS', type: 'number', min: 0, max: 2, placeholder: '1'},
    {name: 'username', label: 'User name', autocomplete: 'off'},
    {name: 'password', label: 'Password', type: 'password', autocomplete: 'new-password'},
    {name: 'clientId', label: 'Client id', more: true},
    {name: 'delimiter', label: 'Frame delimiter', kind: 'escaped', placeholder: '\\n', help: 'Backslash escapes: \\n, \\r\\n.', more: true},
    {name: 'bufferCapacity', label: 'Largest frame (bytes)', type: 'number', more: true},
    {name: 'cleanSession', label: 'Clean session', type: 'checkbox', def: true, more: true},
    {name: 'timeoutMs', label: 'Time-out (ms)', type: 'number', placeholder: '10000', more: true},
    {name: 'caFile', label: 'CA file', more: true},
    {name: 'certFile', label: 'Client certificate file', more: true},
    {name: 'keyFile', label: 'Client key file', more: true},
    {name: 'insecureSkipVerify', label: 'Skip certificate verification', type: 'checkbox', more: true},
  ],
  bacnet: [
    {name: 'host', label: 'Host', placeholder: '192.168.10.40'},
    {name: 'port', label: 'UDP port', type: 'number', placeholder: '47808'},
    {name: 'deviceInstance', label: 'Device instance', type: 'number', min: 0, max: 4194302},
    {name: 'timeoutMs', label: 'Time-out (ms)', type: 'number', placeholder: '3000'},
    {name: 'localPort', label: 'Local UDP port', type: 'number', placeholder: '0', help: '0 picks a free one.', more: true},
    {name: 'maxApdu', label: 'Largest APDU', type: 'number', placeholder: '1476', more: true},
    {name: 'usePropertyMultiple', label: 'ReadPropertyMultiple', type: 'checkbox', def: true, more: true},
  ],
};

const modbusTypes = ['', 'bool', 'int16', 'uint16', 'int32', 'uint32', 'float32', 'int64', 'uint64', 'float64'];
const points = {
  modbus: [
    {name: 'name', label: 'Name'},
    {name: 'register', label: 'Register', placeholder: 'holding:0', help: '<area>:<index>, area holding, input, coil or discrete (hr:1 and @unit work too)'},
    {name: 'type', label: 'Type', type: 'select', options: modbusTypes.map(t => [t, t || 'default (uint16)'])},
    {name: 'scale', label: 'Scale', type: 'number', step: 'any'},
    {name: 'unit', label: 'Unit'},
    {name: 'byte_order', label: 'Byte order', type: 'select', options: orders},
    {name: 'word_order', label: 'Word order', type: 'select', options: orders},
  ],
  opcua: [
    {name: 'name', label: 'Name'},
    {name: 'register', label: 'Node id', placeholder: 'ns=2;s=Temperature'},
    {name: 'type', label: 'Type', type: 'select', options: ['', 'float', 'int', 'int64', 'bool', 'string'].map(t => [t, t || 'as sent'])},
    {name: 'scale', label: 'Scale', type: 'number', step: 'any'},
    {name: 'unit', label: 'Unit'},
  ],
  mqtt: [
    {name: 'name', label: 'Name'},
    {name: 'register', label: 'JSON path', placeholder: 'sensors.temp'},
    {name: 'type', label: 'Type', type: 'select', options: ['', 'float', 'int', 'bool', 'string'].map(t => [t, t || 'as sent'])},
    {name: 'scale', label: 'Scale', type: 'number', step: 'any'},
    {name: 'unit', label: 'Unit'},
  ],
  bacnet: [
    {name: 'name', label: 'Name'},
    {name: 'register', label: 'Object', placeholder: 'analog-input:1', help: '<object-type>:<instance>[/<property>][@<priority>]'},
    {name: 'scale', label: 'Scale', type: 'number', step: 'any'},
    {name: 'unit', label: 'Unit'},
  ],
};

export const protocols = [['modbus', 'Modbus'], ['opcua', 'OPC-UA'], ['mqtt', 'MQTT'], ['bacnet', 'BACnet/IP']];

function shown(spec, v) {
  if (v === undefined || v === null) return spec.def;
  if (spec.kind === 'lines') return (Array.isArray(v) ? v : [v]).join('\n');
  if (spec.kind === 'escaped') return JSON.stringify(String(v)).slice(1, -1);
  return v;
}

function read(spec, v) {
  if (spec.kind === 'lines') return linesToList(v);
  if (spec.kind === 'escaped' && v !== '') {
    try { return JSON.parse(`"${v}"`); } catch { return v; }
  }
  return v;
}

// merge puts a form's values for specs over the original object: keys
// the form does not know are kept (PATCH replaces the whole object), a
// blank field removes its key so the API's default applies.
function merge(orig, specs, got) {
  const out = {...(orig || {})};
  for (const s of specs) {
    const v = got ? got[s.name] : undefined;
    if (v === undefined || v === '' || (Array.isArray(v) && !v.length && s.kind === 'lines' && !(orig && s.name in orig))) delete out[s.name];
    else out[s.name] = read(s, v);
  }
  return out;
}

// endpointForm renders into el the form for ep (an endpoint as GET
// /v1/endpoints shows it, or {protocol} for a new one) and calls
// save(body) on submit; save's ApiError shows by the fields.
export function endpointForm(el, ep, {isNew, save, onProtocol}) {
  // A protocol the form does not know (a hand-typed ?protocol=) gets
  // the Modbus form rather than no form.
  const protocol = connections[ep.protocol] ? ep.protocol : 'modbus';
  const conn = connections[protocol];
  const cols = points[protocol];
  let rows = (ep.data_points || []).map(p => ({...p}));
  if (!rows.length) rows = [{}];
  const pointsEl = h('div', {class: 'points', id: 'data-points'});

  const readRows = (form) => {
    const v = values(form).data_points || [];
    rows = rows.map((orig, i) => merge(orig, cols, v[i]));
  };
  const drawRows = () => {
    replace(pointsEl, rows.map((p, i) => h('fieldset', {class: 'point', 'data-row': String(i)},
      h('legend', {text: `Data point ${i + 1}`}),
      cols.map(c => field({...c, name: `data_points[${i}].${c.name}`, value: p[c.name] ?? '', help: undefined})),
      h('button', {type: 'button', class: 'secondary', text: 'Remove', 'aria-label': `Remove data point ${i + 1}`,
        onclick: () => { readRows(form); rows.splice(i, 1); drawRows(); }}))));
  };

  const connField = (c) => field({...c, name: `connection.${c.name}`, value: shown(c, (ep.connection || {})[c.name])});
  const form = h('form', {class: 'stack wide', id: 'endpoint-form', novalidate: true},
    isNew ? field({name: 'protocol', label: 'Protocol', type: 'select', options: protocols, value: protocol}) : null,
    h('div', {class: 'grid2'},
      field({name: 'name', label: 'Name', value: ep.name ?? '', required: true, help: 'Unique; no "/".'}),
      protocol === 'mqtt' && !ep.poll_interval ? null
        : field({name: 'poll_interval', label: 'Poll interval (ms)', type: 'number', value: ep.poll_interval ?? 1000, min: 10})),
    field({name: 'enabled', label: 'Enabled', type: 'checkbox', value: ep.enabled ?? true}),
    h('fieldset', {}, h('legend', {text: 'Connection'}),
      h('div', {class: 'grid2'}, conn.filter(c => !c.more).map(connField)),
      h('details', {}, h('summary', {text: 'More connection settings'}),
        h('div', {class: 'grid2'}, conn.filter(c => c.more).map(connField)))),
    h('fieldset', {}, h('legend', {text: 'Data points'}),
      cols.filter(c => c.help).map(c => h('p', {class: 'help', text: `${c.label}: ${c.help}`})),
      h('div', {class: 'field', 'data-field': 'data_points'}, h('small', {class: 'field-error', role: 'alert', hidden: true})),
      pointsEl,
      h('button', {type: 'button', class: 'secondary', id: 'add-point', text: 'Add data point',
        onclick: () => { readRows(form); rows.push({}); drawRows(); pointsEl.lastChild.querySelector('input').focus(); }})),
    h('details', {}, h('summary', {text: 'Publishing and batching'}),
      h('div', {class: 'grid2'},
        field({name: 'mqtt_topic', label: 'MQTT topic', value: ep.mqtt_topic ?? '', help: 'Defaults to the name.'}),
        field({name: 'buffer_size', label: 'Batch size (messages)', type: 'number', value: ep.buffer_size ?? ''}),
        field({name: 'buffer_time_ms', label: 'Batch time (ms)', type: 'number', value: ep.buffer_time_ms ?? ''}),
        field({name: 'heartbeat_topic', label: 'Heartbeat topic', value: ep.heartbeat_topic ?? ''}),
        field({name: 'heartbeat_interval', label: 'Heartbeat interval (s)', type: 'number', value: ep.heartbeat_interval ?? ''})),
      field({name: 'metadata', label: 'Metadata (JSON object)', type: 'textarea', rows: 3,
        value: ep.metadata && Object.keys(ep.metadata).length ? JSON.stringify(ep.metadata, null, 2) : ''})),
    h('div', {class: 'row-actions'},
      h('button', {type: 'submit', id: 'save-endpoint', text: isNew ? 'Create endpoint' : 'Save changes'}),
      h('a', {class: 'button secondary', href: '#/endpoints', text: 'Cancel'})));
  drawRows();

  if (isNew) {
    form.querySelector('[data-input="protocol"]').addEventListener('change', (e) => {
      const v = values(form);
      onProtocol({protocol: e.target.value, name: v.name, enabled: v.enabled, poll_interval: v.poll_interval});
    });
  }
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    readRows(form);
    const v = values(form);
    const body = {name: v.name, enabled: v.enabled, connection: merge(ep.connection, conn, v.connection),
      data_points: rows.filter(r => Object.keys(r).length)};
    if (isNew) body.protocol = v.protocol;
    if (v.poll_interval !== undefined) body.poll_interval = v.poll_interval;
    for (const k of ['buffer_size', 'buffer_time_ms', 'heartbeat_interval']) {
      if (v[k] !== undefined) body[k] = v[k];
    }
    for (const k of ['mqtt_topic', 'heartbeat_topic']) {
      if (v[k] !== '' || (ep[k] ?? '') !== '') body[k] = v[k];
    }
    if (v.metadata.trim()) {
      try {
        body.metadata = JSON.parse(v.metadata);
      } catch (err) {
        showErrors(form, [{field: 'metadata', message: `not JSON: ${err.message}`}]);
        return;
      }
    } else if (ep.metadata && Object.keys(ep.metadata).length) body.metadata = {};
    await submitting(form, () => save(body));
  });
  replace(el, form);
  return form;
}
