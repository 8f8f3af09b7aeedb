// Dashboard widgets (docs/dashboards.md, layout schema 1): line chart,
// gauge, stat and table. Each is fed once by the readings API when the
// dashboard opens and then by the page's one live stream: widget() gives
// {el, load(), live(readings), destroy()}.
import {h, replace, fmtTime, fmtNum} from '../../lib/dom.js';
import {timeChart} from '../../lib/chart.js';
import {loadSeries, align, metricName, parseDuration} from './readings-data.js';

// rowHeight is one grid row in pixels (console.css .dash-grid).
export const rowHeight = 64;

export const widgetTypes = [['line', 'Line chart'], ['gauge', 'Gauge'], ['stat', 'Stat (one number)'], ['table', 'Table']];

// metricsOf lists the stored metric names a widget shows.
export function metricsOf(w) {
  const dev = w.source && w.source.deviceName;
  const names = w.source && Array.isArray(w.source.metrics) && w.source.metrics.length ? w.source.metrics : [w.source && w.source.metric];
  return names.filter(Boolean).map(m => metricName(dev, m));
}

function fixed(v, decimals) {
  if (typeof v !== 'number') return fmtNum(v);
  return Number.isInteger(decimals) ? v.toFixed(decimals) : fmtNum(v);
}

// widget builds the widget w of a layout for agent.
export function widget(w, {api, agent}) {
  const o = w.options || {};
  const names = metricsOf(w);
  const body = h('div', {class: 'widget-body'});
  const el = h('article', {class: `widget widget-${w.type}`, 'data-widget-id': w.id, 'data-widget-type': w.type,
    'aria-label': w.title || names.join(', ')},
  h('h3', {class: 'widget-title', text: w.title || names.join(', ')}), body);
  el.style.gridColumn = `${w.x + 1} / span ${w.w}`;
  el.style.gridRow = `${w.y + 1} / span ${w.h}`;
  const kind = kinds[w.type];
  if (!kind) {
    replace(body, h('p', {class: 'empty', text: `Unknown widget type ${w.type}.`}));
    return {el, load: async () => {}, live() {}, destroy() {}};
  }
  const k = kind({w, o, names, body, api, agent});
  // Only the readings this widget shows reach it.
  const want = new Set(names);
  return {
    el,
    load: () => k.load().catch(err => replace(body, h('p', {class: 'alert error', role: 'alert', text: err.message}))),
    live(readings) {
      const mine = readings.filter(r => want.has(`${r.deviceName}.${r.name}`));
      if (mine.length) k.live(mine.map(r => ({...r, metric: `${r.deviceName}.${r.name}`})));
    },
    destroy() { if (k.destroy) k.destroy(); },
  };
}

// latest reads the newest reading of metric.
async function latest(api, agent, metric) {
  const res = await api.get(`/readings/${encodeURIComponent(agent)}/latest?metric=${encodeURIComponent(metric)}`);
  return (res.readings || [])[0] || null;
}

const kinds = {
  line({w, o, names, body, api, agent}) {
    const windowSec = parseDuration(o.window || '15m');
    let chart = null;
    return {
      async load() {
        const step = ['1m', '1h', '1d'].includes(o.step) ? o.step : undefined;
        const list = await Promise.all(names.map(m => loadSeries(api, agent, m, windowSec, {step})));
        const el = h('div');
        replace(body, el);
        chart = timeChart(el, {series: names.map(m => ({label: m, unit: o.unit})), windowSec, height: Math.max(w.h * rowHeight - 70, 80)});
        const {x, ys} = align(list);
        chart.set(x, ys);
      },
      live(rs) {
        if (!chart) return;
        const byT = new Map();
        for (const r of rs) {
          if (!byT.has(r.t)) byT.set(r.t, new Map());
          byT.get(r.t).set(r.metric, r.value);
        }
        for (const t of [...byT.keys()].sort((a, b) => a - b)) chart.push(t, names.map(m => byT.get(t).get(m) ?? null));
      },
      destroy() { if (chart) chart.destroy(); },
    };
  },

  // stat: the latest value; with a window, also its range over the window.
  stat({o, names, body, api, agent}) {
    const value = h('div', {class: 'stat-value', 'data-value': ''});
    const meta = h('div', {class: 'muted stat-meta'});
    const spread = h('div', {class: 'muted stat-meta'});
    replace(body, value, meta, spread);
    let lo = Infinity;
    let hi = -Infinity;
    const widen = (v) => {
      if (!o.window || typeof v !== 'number' || !Number.isFinite(v)) return;
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
      spread.textContent = `${fixed(lo, o.decimals)} to ${fixed(hi, o.decimals)} over ${o.window}`;
    };
    const show = (v, unit, q, t) => {
      value.dataset.value = typeof v === 'number' ? String(v) : '';
      replace(value, fixed(v, o.decimals), h('span', {class: 'stat-unit', text: o.unit || unit || ''}));
      meta.textContent = `${q || ''} ${t ? fmtTime(t) : ''}`.trim();
      widen(v);
    };
    return {
      async load() {
        if (o.window) {
          const s = await loadSeries(api, agent, names[0], parseDuration(o.window));
          s.y.forEach(widen);
        }
        const r = await latest(api, agent, names[0]);
        if (r) show(typeof r.value === 'number' ? r.value : null, r.unit, r.quality, r.time);
        else value.textContent = '—';
      },
      live(rs) {
        const r = rs[rs.length - 1];
        show(r.value, r.unit, r.quality, r.t * 1000);
      },
    };
  },

  gauge({o, names, body, api, agent}) {
    const min = typeof o.min === 'number' ? o.min : 0;
    const max = typeof o.max === 'number' && o.max > min ? o.max : min + 100;
    // A half circle of radius 80 around (100, 100), drawn from the left.
    const arc = (f) => {
      const a = Math.PI * (1 - f);
      return `M 20 100 A 80 80 0 0 1 ${(100 + 80 * Math.cos(a)).toFixed(2)} ${(100 - 80 * Math.sin(a)).toFixed(2)}`;
    };
    const fill = h('svg:path', {class: 'gauge-fill', d: arc(0)});
    const label = h('svg:text', {class: 'gauge-value', x: '100', y: '92', 'text-anchor': 'middle', text: '—'});
    const svg = h('svg:svg', {viewBox: '0 0 200 120', class: 'gauge', role: 'img', 'aria-label': `${names[0]} from ${min} to ${max}`},
      h('svg:path', {class: 'gauge-track', d: arc(1)}), fill, label,
      h('svg:text', {class: 'gauge-end', x: '20', y: '116', 'text-anchor': 'middle', text: fmtNum(min)}),
      h('svg:text', {class: 'gauge-end', x: '180', y: '116', 'text-anchor': 'middle', text: fmtNum(max)}));
    replace(body, svg);
    const show = (v) => {
      const f = typeof v === 'number' && Number.isFinite(v) ? Math.min(Math.max((v - min) / (max - min), 0), 1) : 0;
      fill.setAttribute('d', f > 0 ? arc(f) : 'M 20 100');
      label.textContent = `${fixed(v, o.decimals)}${o.unit ? ' ' + o.unit : ''}`;
      svg.dataset.value = typeof v === 'number' ? String(v) : '';
    };
    return {
      async load() {
        const r = await latest(api, agent, names[0]);
        show(r && typeof r.value === 'number' ? r.value : null);
      },
      live(rs) { show(rs[rs.length - 1].value); },
    };
  },

  table({o, names, body, api, agent}) {
    const limit = Number.isInteger(o.rows) ? o.rows : 10;
    let rows = []; // [{t, values: Map}] newest first
    const draw = () => replace(body, h('table', {class: 'grid compact'},
      h('thead', {}, h('tr', {}, h('th', {scope: 'col', text: 'Time'}), names.map(n => h('th', {scope: 'col', text: n})))),
      h('tbody', {}, rows.map(r => h('tr', {}, h('td', {text: fmtTime(r.t * 1000)}),
        names.map(n => h('td', {text: r.values.has(n) ? `${fixed(r.values.get(n), o.decimals)}${o.unit ? ' ' + o.unit : ''}` : '—'})))))));
    return {
      async load() {
        // The newest rows of the last hour.
        const list = await Promise.all(names.map(m => loadSeries(api, agent, m, 3600, {step: ''})));
        const {x, ys} = align(list);
        rows = [];
        for (let i = x.length - 1; i >= 0 && rows.length < limit; i--) {
          rows.push({t: x[i], values: new Map(names.map((n, j) => [n, ys[j][i]]).filter(([, v]) => v !== null))});
        }
        draw();
      },
      live(rs) {
        for (const r of rs) {
          let row = rows.find(x => x.t === r.t);
          if (!row) {
            row = {t: r.t, values: new Map()};
            rows.push(row);
          }
          row.values.set(r.metric, r.value);
        }
        rows.sort((a, b) => b.t - a.t);
        rows = rows.slice(0, limit);
        draw();
      },
    };
  },
};
