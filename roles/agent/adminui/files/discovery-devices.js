// What the discovery page shows of a scan's or a run's devices and of
// rule runs (docs/discovery.md). A device found becomes an endpoint
// through the new-endpoint form, prefilled from the query string, so it
// is saved through the same validation as one typed by hand.
import {h, badge, fmtTime, table} from '../lib/dom.js';
import {qs} from '../lib/api.js';

// addHref is the new-endpoint form prefilled with dev's protocol, name
// and connection (pages/endpoint-new.js reads them back).
export function addHref(dev) {
  return '#/endpoints/new' + qs({protocol: dev.protocol, name: dev.name, connection: JSON.stringify(dev.connection || {})});
}

// summary is one line of a device's details, per protocol: what tells
// an operator which device it is.
function summary(dev) {
  const d = dev.details || {};
  const parts = [];
  switch (dev.protocol) {
    case 'modbus':
      if (d.holdingRegister0 !== undefined) parts.push(`holding 0 = ${d.holdingRegister0}`);
      if (d.exception !== undefined) parts.push(`exception ${d.exception}`);
      break;
    case 'opcua':
      if (d.applicationName) parts.push(d.applicationName);
      if (d.securityModes) parts.push(`security ${[].concat(d.securityModes).join(', ')}`);
      break;
    case 'mqtt':
      if (d.messages !== undefined) parts.push(`${d.messages} messages${d.retained ? ' (retained)' : ''}`);
      if (d.shape) parts.push(d.shape.fields ? `fields ${Object.keys(d.shape.fields).join(', ')}` : `${d.shape.format || ''} ${d.shape.type || ''}`.trim());
      if (d.topicsNotListed) parts.push(`${d.topicsNotListed} more topics not listed`);
      break;
    case 'bacnet':
      if (d.vendorId !== undefined) parts.push(`vendor ${d.vendorId}`);
      if (Array.isArray(d.objects)) parts.push(`${d.objects.length} objects`);
      break;
  }
  return parts.join(' · ') || '—';
}

// devicesTable lists devices with one "Add as endpoint" link each.
export function devicesTable(devices, {validated = false, empty = 'No device found.'} = {}) {
  const cols = [
    {label: 'Protocol', value: d => d.protocol},
    {label: 'Name', value: d => h('span', {class: 'mono', 'data-device': d.name, text: d.name})},
    {label: 'Connection', value: d => h('span', {class: 'mono', text: JSON.stringify(d.connection || {})})},
    {label: 'Details', value: summary},
  ];
  if (validated) cols.push({label: 'Validated', value: d => d.validated ? badge('yes', 'online') : badge('no', 'degraded')});
  cols.push({label: '', value: d => h('a', {class: 'button secondary', href: addHref(d), 'data-add': d.name,
    'aria-label': `Add ${d.name} as an endpoint`, text: 'Add as endpoint'})});
  return table(cols, devices || [], {empty});
}

const runKind = {running: 'queued', succeeded: 'online', failed: 'error'};

// runsTable lists runs, newest first; ruleName names a run's rule.
export function runsTable(runs, ruleName = () => '', {empty = 'No run yet.'} = {}) {
  return table([
    {label: 'Started', value: r => fmtTime(r.started_at)},
    {label: 'Rule', value: r => ruleName(r.rule_uuid) || h('span', {class: 'mono', text: r.rule_uuid})},
    {label: 'Status', value: r => h('span', {'data-run-status': r.status}, badge(r.status, runKind[r.status] || r.status))},
    {label: 'Took', value: r => r.finished_at ? `${Math.max(0, (new Date(r.finished_at) - new Date(r.started_at)) / 1000).toFixed(1)} s` : '—'},
    {label: 'Found', value: r => String(r.devices_found ?? 0)},
    {label: 'Endpoints created', value: r => String(r.endpoints_created ?? 0)},
    {label: 'Devices', value: r => (r.devices || []).length
      ? h('details', {}, h('summary', {text: `${r.devices.length} devices`}), devicesTable(r.devices))
      : '—'},
    {label: 'Error', value: r => r.error || ''},
  ], runs || [], {empty});
}
