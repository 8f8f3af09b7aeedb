// Drift: schema-drift detection per protocol output (docs/drift.md). Each
// output's options (PATCH /v1/protocol-outputs/:protocol/drift), what the
// running detector tracks (GET /v1/drift/state) and the stored events
// (GET and DELETE /v1/drift/events), refreshed every 10 s.
import {h, replace, badge, fmtTime, table} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {qs} from '../../lib/api.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, status, confirmButton, run} from '../util.js';

const kinds = ['missing_field', 'new_field', 'type_change', 'field_promoted', 'field_retired', 'field_limit'];

// optionsForm edits one output's drift options; off sends null, which
// clears them.
function optionsForm(api, out, onSaved) {
  const o = out.drift_options || {};
  const msg = h('div', {'aria-live': 'polite'});
  // Inputs are named by their path in the request, as the API names
  // them in its errors.
  const form = h('form', {class: 'filters', 'data-protocol': out.protocol, novalidate: true},
    field({name: 'drift_options.enabled', label: 'Detect drift', type: 'checkbox', value: !!o.enabled}),
    field({name: 'drift_options.windowMs', label: 'Batch window (ms)', type: 'number', value: o.windowMs ?? '', min: 0,
      placeholder: '0', help: '0: each frame or poll is a batch.'}),
    field({name: 'drift_options.maxFieldCount', label: 'Fields tracked at most', type: 'number', value: o.maxFieldCount ?? '',
      min: 1, placeholder: '500'}),
    h('button', {type: 'submit', text: 'Save'}));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    replace(msg);
    const body = values(form);
    const on = body.drift_options.enabled;
    if (!on) body.drift_options = null;
    const saved = await submitting(form, () => api.patch(`/protocol-outputs/${encodeURIComponent(out.protocol)}/drift`, body));
    if (saved) {
      status(msg, 'ok', on ? 'Drift detection on.' : 'Drift detection off.');
      onSaved();
    }
  });
  return h('section', {class: 'card drift-output'}, h('h3', {text: out.protocol}), msg, form);
}

function stateTable(st) {
  return h('section', {class: 'card drift-output', 'data-state': st.protocol},
    h('h3', {}, st.protocol, ' ', st.warmed_up ? badge('watching', 'online') : badge(`warming up (${st.batches} of 20 batches)`, 'degraded')),
    h('p', {class: 'muted', text: `${st.batches} batches, ${st.fields.length} fields tracked` +
      (st.fields_dropped ? `, ${st.fields_dropped} fields over the limit` : '') +
      (st.events_over_budget ? `, ${st.events_over_budget} events over the budget` : '')}),
    table([
      {label: 'Field', value: f => h('span', {class: 'mono', text: f.field})},
      {label: 'Type', value: f => f.type || '—'},
      {label: 'Expected', value: f => f.expected ? 'yes' : 'no'},
      {label: 'Presence (last 50)', value: f => `${Math.round((f.presence || 0) * 100)} %`},
      {label: 'Absent for', value: f => f.batches_absent ? `${f.batches_absent} batches` : '—'},
      {label: 'Last seen', value: f => fmtTime(f.last_seen)},
    ], st.fields, {empty: 'No field seen yet.'}));
}

function eventsTable(events) {
  return table([
    {label: 'Time', value: e => fmtTime(e.at)},
    {label: 'Protocol', value: e => e.protocol},
    {label: 'Kind', value: e => badge(e.kind.replace('_', ' '), e.kind === 'missing_field' || e.kind === 'type_change' ? 'degraded' : 'info')},
    {label: 'Field', value: e => h('span', {class: 'mono', text: e.field || '—'})},
    {label: 'Detail', value: e => e.detail || ''},
  ], events, {empty: 'No drift event matches.'});
}

export default {
  path: '/drift',
  title: 'Drift',
  nav: 'Drift',
  async render(ctx) {
    const {api} = ctx.app;
    const outputsEl = h('div', {id: 'drift-outputs'});
    const stateEl = h('div', {id: 'drift-state'});
    const eventsEl = h('div', {id: 'drift-events'});
    const count = h('p', {class: 'muted', 'aria-live': 'polite'});
    const msg = h('div', {'aria-live': 'polite'});
    const filters = h('form', {class: 'filters', id: 'drift-filters'},
      field({name: 'protocol', label: 'Protocol', type: 'text', placeholder: 'any'}),
      field({name: 'kind', label: 'Kind', type: 'select', value: '', options: [['', 'any'], ...kinds.map(k => [k, k.replace('_', ' ')])]}),
      field({name: 'field', label: 'Field', type: 'text', placeholder: 'any'}),
      field({name: 'limit', label: 'Events', type: 'number', value: 200, min: 1, max: 1000}),
      h('button', {type: 'submit', text: 'Show'}));
    const clear = confirmButton('Delete all events', async () => {
      await run(msg, () => api.del('/drift/events'), 'Drift events deleted.');
      load();
    });

    // Outputs are stored once configured; a protocol whose endpoints
    // have none yet is listed with drift off, so it can be turned on.
    const loadOutputs = async () => {
      let outs;
      try {
        const [r, eps] = await Promise.all([api.get('/protocol-outputs'), api.get('/endpoints')]);
        outs = r.outputs || [];
        const known = new Set(outs.map(o => o.protocol));
        for (const p of new Set((eps.endpoints || []).map(e => e.protocol))) {
          if (!known.has(p)) outs.push({protocol: p, drift_options: null});
        }
      } catch (err) {
        replace(outputsEl, errorBox(err));
        return;
      }
      outs.sort((a, b) => a.protocol.localeCompare(b.protocol));
      replace(outputsEl, outs.length ? outs.map(o => optionsForm(api, o, load)) :
        h('p', {class: 'empty', text: 'No protocol output yet: add an endpoint first.'}));
    };
    const load = async () => {
      const v = values(filters);
      try {
        const [st, ev] = await Promise.all([api.get('/drift/state'),
          api.get('/drift/events' + qs({protocol: v.protocol.trim(), kind: v.kind, field: v.field.trim(), limit: v.limit}))]);
        const outs = st.outputs || [];
        replace(stateEl, outs.length ? outs.map(stateTable) : h('p', {class: 'empty', text: 'Drift detection is off on every output.'}));
        replace(count, `${(ev.events || []).length} shown of ${ev.total}.`);
        replace(eventsEl, eventsTable(ev.events || []));
      } catch (err) {
        replace(eventsEl, errorBox(err));
      }
    };
    filters.addEventListener('submit', (e) => { e.preventDefault(); load(); });

    replace(ctx.root, heading('Schema drift', clear), msg,
      h('h2', {text: 'Options per protocol output'}), outputsEl,
      h('h2', {text: 'What the detector tracks'}), stateEl,
      h('h2', {text: 'Events'}), filters, count, eventsEl);
    await loadOutputs();
    return every(10000, load);
  },
};
