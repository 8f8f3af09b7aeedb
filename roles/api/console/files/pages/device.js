// One device of an agent: a chart of its metrics over a chosen range
// (the readings API's time series), with the live stream's points
// appended, and the latest value of each metric with its quality.
import {h, replace, table, badge, fmtTime, fmtNum} from '../../lib/dom.js';
import {timeChart} from '../../lib/chart.js';
import {field} from '../../lib/form.js';
import {loadSeries, align, liveReadings, parseDuration, ranges, qualityWord} from './readings-data.js';

// At most this many metrics share the chart; the picker chooses which.
const maxSeries = 6;

export default {
  path: '/agents/:uuid/devices/:device',
  title: 'Device',
  navGroup: 'Agents',
  async render(ctx) {
    const {root, app, params, query} = ctx;
    const {uuid, device} = params;
    const agent = await app.api.get(`/agents/${encodeURIComponent(uuid)}`);
    const latest = await app.api.get(`/readings/${agent.uuid}/latest`);
    const rows = new Map((latest.readings || []).filter(r => r.deviceName === device).map(r => [r.metricName, r]));
    const metrics = [...rows.keys()].sort();
    const range = ranges.some(([v]) => v === query.get('range')) ? query.get('range') : '15m';
    let chosen = metrics.slice(0, maxSeries);

    const live = h('span', {class: 'live', text: 'live'});
    const controls = h('form', {class: 'toolbar', 'aria-label': 'Chart range and metrics'},
      field({name: 'range', label: 'Range', type: 'select', value: range, options: ranges}),
      metrics.length > 1 ? h('fieldset', {class: 'metric-pick'}, h('legend', {text: 'Metrics'}),
        metrics.map(m => field({name: `m:${m}`, label: m.slice(device.length + 1) || m, type: 'checkbox', value: chosen.includes(m)}))) : null);
    const chartBox = h('div', {id: 'device-chart'});
    const latestBox = h('div');
    replace(root,
      h('p', {class: 'crumbs'}, h('a', {href: '#/agents', text: 'Agents'}), ' / ',
        h('a', {href: `#/agents/${encodeURIComponent(agent.uuid)}`, text: agent.name || agent.uuid}), ' / '),
      h('h1', {id: 'page-title', text: device}),
      h('p', {}, live),
      controls, chartBox, h('h2', {text: 'Latest values'}), latestBox);

    const drawLatest = () => replace(latestBox, table([
      {label: 'Metric', value: r => h('span', {class: 'mono', text: r.metricName})},
      {label: 'Value', value: r => h('span', {'data-metric': r.metricName, text: `${fmtNum(r.value)}${r.unit ? ' ' + r.unit : ''}`})},
      {label: 'Quality', value: r => badge(qualityWord(r.quality))},
      {label: 'Time', value: r => h('span', {title: r.time, text: fmtTime(r.time)})},
    ], metrics.map(m => rows.get(m)), {empty: 'No readings from this device yet.', caption: `Latest values of ${device}`}));
    drawLatest();

    let chart = null;
    let windowSec = parseDuration(range);
    let seq = 0;
    const draw = async () => {
      const mine = ++seq;
      if (chart) chart.destroy();
      chart = null;
      if (!chosen.length) {
        replace(chartBox, h('p', {class: 'empty', text: metrics.length ? 'Pick a metric to chart.' : 'No readings from this device yet.'}));
        return;
      }
      const series = await Promise.all(chosen.map(m => loadSeries(app.api, agent.uuid, m, windowSec)));
      if (mine !== seq || ctx.stale()) return;
      const el = h('div');
      replace(chartBox, el);
      chart = timeChart(el, {series: chosen.map(m => ({label: m.slice(device.length + 1) || m, unit: (rows.get(m) || {}).unit})),
        windowSec, title: `${device}, ${ranges.find(([v]) => v === range)[1].toLowerCase()}`});
      const {x, ys} = align(series);
      chart.set(x, ys);
      const iv = series[0].interval;
      if (iv) el.append(h('p', {class: 'muted', text: `Averages per ${iv === '1m' ? 'minute' : 'hour'}; live points are raw.`}));
    };

    controls.addEventListener('change', () => {
      const r = controls.elements.range.value;
      windowSec = parseDuration(r);
      chosen = metrics.filter(m => !controls.elements[`m:${m}`] || controls.elements[`m:${m}`].checked).slice(0, maxSeries);
      draw().catch(err => replace(chartBox, h('div', {class: 'alert error', role: 'alert', text: err.message})));
    });
    ctx.onCleanup(() => { if (chart) chart.destroy(); });
    await draw();

    // Live points: one per batch of this device, every chosen metric at
    // the batch's time (null for one it did not carry).
    let pending = false;
    return app.stream(`/agents/${encodeURIComponent(agent.uuid)}/stream`, (event, data) => {
      if (event !== 'metrics') return;
      const rs = liveReadings(data).filter(r => r.deviceName === device);
      if (!rs.length) return;
      const byTime = new Map();
      for (const r of rs) {
        const name = `${device}.${r.name}`;
        rows.set(name, {...rows.get(name), metricName: name, deviceName: device, value: r.raw, unit: r.unit, quality: r.quality,
          time: new Date(r.t * 1000).toISOString()});
        if (!byTime.has(r.t)) byTime.set(r.t, new Map());
        byTime.get(r.t).set(name, r.value);
      }
      if (chart) {
        for (const t of [...byTime.keys()].sort((a, b) => a - b)) chart.push(t, chosen.map(m => byTime.get(t).get(m) ?? null));
      }
      if (!pending) {
        pending = true;
        setTimeout(() => { pending = false; if (!ctx.stale()) drawLatest(); }, 1000);
      }
    }, (state) => { live.dataset.state = state; });
  },
};
