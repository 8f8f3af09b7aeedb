// Anomaly: the edge detector (docs/anomaly.md). Its configuration
// (PATCH /v1/anomaly/config, errors by field), the metrics it can watch
// with their latest scores and forecasts, the alerts it raised (kept in
// memory, lost on restart), its baselines per hour slot, and a form that
// injects test values, which the agent takes in development mode only.
import {h, replace, badge, fmtTime, fmtNum, table} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {qs} from '../../lib/api.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, status, confirmButton, run} from '../util.js';

const sensitivities = [['', 'default'], ['low', 'low'], ['medium', 'medium'], ['high', 'high']];

// metricRow is one configured metric; names follow the request's paths
// (metrics[2].threshold), as the API's errors do.
function metricRow(i, m = {}) {
  const p = `metrics[${i}]`;
  return h('div', {class: 'filters metric-row', 'data-row': i},
    field({name: `${p}.name`, label: 'Metric', value: m.name || '', required: true}),
    field({name: `${p}.sensitivity`, label: 'Sensitivity', type: 'select', value: m.sensitivity || '', options: sensitivities}),
    field({name: `${p}.threshold`, label: 'Threshold (σ, 0 = by sensitivity)', type: 'number', value: m.threshold ?? '', step: 'any', min: 0}),
    field({name: `${p}.windowSize`, label: 'Window (samples)', type: 'number', value: m.windowSize ?? '', min: 0}),
    h('button', {type: 'button', class: 'secondary', text: 'Remove', onclick: (e) => e.target.closest('.metric-row').remove()}));
}

// renumber keeps the rows' paths dense after a removal, so the body's
// indexes match what the API will name.
function renumber(rows) {
  [...rows.querySelectorAll('.metric-row')].forEach((row, i) => {
    for (const el of row.querySelectorAll('[data-input]')) {
      const name = el.dataset.input.replace(/^metrics\[\d+\]/, `metrics[${i}]`);
      el.dataset.input = name;
      el.name = name;
      el.closest('[data-field]').dataset.field = name;
    }
  });
}

function configForm(api, cfg) {
  const msg = h('div', {'aria-live': 'polite'});
  const rows = h('div', {id: 'anomaly-metrics-rows'}, (cfg.metrics || []).map((m, i) => metricRow(i, m)));
  const form = h('form', {class: 'stack', id: 'anomaly-config', novalidate: true},
    field({name: 'enabled', label: 'Detect anomalies', type: 'checkbox', value: !!cfg.enabled}),
    h('fieldset', {}, h('legend', {text: 'Metrics with their own tuning'}), rows,
      h('button', {type: 'button', class: 'secondary', text: 'Add a metric', onclick: () => {
        rows.append(metricRow(rows.children.length));
        renumber(rows);
      }})),
    h('button', {type: 'submit', text: 'Save configuration'}));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    replace(msg);
    renumber(rows);
    const v = values(form);
    const body = {enabled: v.enabled, metrics: (v.metrics || []).filter(Boolean)};
    const saved = await submitting(form, () => api.patch('/anomaly/config', body));
    if (saved) status(msg, 'ok', 'Configuration saved.');
  });
  return [msg, form];
}

function testForm(api, onDone) {
  const msg = h('div', {'aria-live': 'polite'});
  const form = h('form', {class: 'filters', id: 'anomaly-test', novalidate: true},
    field({name: 'metric', label: 'Metric', required: true}),
    field({name: 'value', label: 'Value', type: 'number', step: 'any', required: true}),
    field({name: 'count', label: 'Points', type: 'number', value: 1, min: 1}),
    h('button', {type: 'submit', text: 'Inject'}));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    replace(msg);
    const r = await submitting(form, () => api.post('/test/anomaly', values(form)));
    if (r) {
      status(msg, 'ok', `${r.message || 'Injected.'} ${(r.recentAlerts || []).length} recent alerts.`);
      onDone();
    }
  });
  return h('details', {class: 'card'}, h('summary', {text: 'Inject test values (development mode only)'}),
    h('p', {class: 'muted', text: 'The agent takes these only when agent.development is on; otherwise it answers why not.'}), msg, form);
}

const severityKind = {critical: 'error', warning: 'degraded', info: 'info'};

export default {
  path: '/anomaly',
  title: 'Anomaly',
  nav: 'Anomaly',
  async render(ctx) {
    const {api} = ctx.app;
    const {config} = await api.get('/anomaly/config');
    if (ctx.stale()) return;
    const statsEl = h('div', {id: 'anomaly-stats', class: 'cards'});
    const metricsEl = h('div', {id: 'anomaly-metrics'});
    const alertsEl = h('div', {id: 'anomaly-alerts'});
    const baselinesEl = h('div', {id: 'anomaly-baselines'});
    const msg = h('div', {'aria-live': 'polite'});
    const alertFilters = h('form', {class: 'filters', id: 'alert-filters'},
      field({name: 'severity', label: 'Severity', type: 'select', value: '',
        options: [['', 'any'], ['critical', 'critical'], ['warning', 'warning'], ['info', 'info']]}),
      field({name: 'metric', label: 'Metric', placeholder: 'any'}),
      field({name: 'limit', label: 'Alerts', type: 'number', value: 200, min: 1, max: 500}),
      h('button', {type: 'submit', text: 'Show'}));
    const baselineFilters = h('form', {class: 'filters', id: 'baseline-filters'},
      field({name: 'metric', label: 'Metric', placeholder: 'any'}),
      field({name: 'limit', label: 'Baselines', type: 'number', value: 100, min: 1, max: 500}),
      h('button', {type: 'submit', text: 'Show'}));

    const load = async () => {
      const a = values(alertFilters);
      const b = values(baselineFilters);
      try {
        const [stats, metrics, alerts, baselines] = await Promise.all([
          api.get('/anomaly/stats'), api.get('/anomaly/metrics'),
          api.get('/anomaly/alerts' + qs({severity: a.severity, metric: a.metric.trim(), limit: a.limit})),
          api.get('/anomaly/baselines' + qs({metric: b.metric.trim(), limit: b.limit}))]);
        const s = stats.stats || {};
        replace(statsEl, [['Data points', s.totalDataPoints], ['Anomalies', s.totalAnomalies], ['Metrics tracked', s.trackedMetrics]]
          .map(([label, v]) => h('div', {class: 'card'}, h('div', {class: 'label', text: label}), h('div', {class: 'value', text: String(v ?? '—')}))));
        const preds = stats.predictions || {};
        replace(metricsEl, table([
          {label: 'Metric', value: m => h('span', {class: 'mono', text: m.name})},
          {label: 'Source', value: m => m.source + (m.endpointName ? ` (${m.endpointName})` : '')},
          {label: 'Score', value: m => typeof m.score === 'number' ? fmtNum(m.score, 3) : '—'},
          {label: 'Next (forecast)', value: m => preds[m.name] ? `${fmtNum(preds[m.name].nextValue)} (${Math.round(preds[m.name].confidence * 100)} %)` : '—'},
          {label: 'Tuned', value: m => m.configured ? 'yes' : 'no'},
        ], metrics.metrics || [], {empty: 'No metric yet: add an endpoint.'}));
        replace(alertsEl, h('p', {class: 'muted', text: `${(alerts.alerts || []).length} shown of ${alerts.total}.`}), table([
          {label: 'Time', value: x => fmtTime(x.timestamp)},
          {label: 'Severity', value: x => badge(x.severity, severityKind[x.severity] || x.severity)},
          {label: 'Metric', value: x => h('span', {class: 'mono', text: x.metric})},
          {label: 'Value', value: x => fmtNum(x.value)},
          {label: 'Threshold', value: x => fmtNum(x.threshold)},
          {label: 'Score', value: x => fmtNum(x.anomaly_score, 3)},
        ], alerts.alerts || [], {empty: 'No alert.'}));
        replace(baselinesEl, h('p', {class: 'muted', text: `${(baselines.baselines || []).length} shown of ${baselines.total}.`}), table([
          {label: 'Metric', value: x => h('span', {class: 'mono', text: x.metric})},
          {label: 'Device', value: x => x.device_id || '—'},
          {label: 'Hour', value: x => String(x.time_slot)},
          {label: 'Mean', value: x => fmtNum(x.mean)},
          {label: 'Std dev', value: x => fmtNum(x.std_dev)},
          {label: 'Median', value: x => fmtNum(x.median)},
          {label: 'MAD', value: x => fmtNum(x.mad)},
          {label: 'Samples', value: x => String(x.sample_count)},
          {label: 'Calculated', value: x => fmtTime(x.calculated_at)},
        ], baselines.baselines || [], {empty: 'No baseline yet: the detector learns each metric first.'}));
      } catch (err) {
        replace(metricsEl, errorBox(err));
      }
    };
    alertFilters.addEventListener('submit', (e) => { e.preventDefault(); load(); });
    baselineFilters.addEventListener('submit', (e) => { e.preventDefault(); load(); });
    const clear = confirmButton('Clear alerts', async () => {
      await run(msg, () => api.del('/anomaly/alerts'), 'Alerts cleared.');
      load();
    });
    const save = h('button', {type: 'button', class: 'secondary', text: 'Save baselines now', onclick: async () => {
      await run(msg, () => api.post('/anomaly/save-baselines'), 'Baselines saved.');
      load();
    }});

    replace(ctx.root, heading('Anomaly detection', save, clear), msg, statsEl,
      h('h2', {text: 'Configuration'}), ...configForm(api, config || {}),
      h('h2', {text: 'Metrics'}), metricsEl,
      h('h2', {text: 'Alerts'}), h('p', {class: 'muted', text: 'Alerts are kept in memory: a restart clears them.'}), alertFilters, alertsEl,
      h('h2', {text: 'Baselines'}), baselineFilters, baselinesEl,
      testForm(api, load));
    return every(5000, load);
  },
};
