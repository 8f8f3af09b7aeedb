// What the readings pages share: loading a metric's history from the
// readings API (docs/readings-api.md), lining several series up on one
// time axis for a chart, and reading the live stream's batches
// (docs/agents-api.md, GET /agents/:uuid/stream).

import {qs} from '../../lib/api.js';

const units = {s: 1, m: 60, h: 3600, d: 86400, w: 604800};

// parseDuration reads "90s", "15m", "1h30m", "7d" into seconds; NaN when
// it is not one.
export function parseDuration(s) {
  const str = String(s || '').trim();
  if (!/^(\d+(\.\d+)?[smhdw])+$/.test(str)) return NaN;
  let total = 0;
  for (const [, n, u] of str.matchAll(/(\d+(?:\.\d+)?)([smhdw])/g)) total += Number(n) * units[u];
  return total;
}

// The ranges the pages offer, as [value, label].
export const ranges = [['15m', 'Last 15 minutes'], ['1h', 'Last hour'], ['6h', 'Last 6 hours'], ['24h', 'Last 24 hours'],
  ['7d', 'Last 7 days']];

// num turns an API value (number, null, "NaN", "+Inf", "-Inf") into a
// number for a chart; null stays a gap.
export function num(v) {
  if (typeof v === 'number') return v;
  if (v === 'NaN') return NaN;
  if (v === '+Inf') return Infinity;
  if (v === '-Inf') return -Infinity;
  return null;
}

// metricName is the stored name of a device's reading: readings are
// stored as "<deviceName>.<reading>"; a name that already carries the
// device stays as it is.
export function metricName(device, metric) {
  return device && !metric.startsWith(device + '.') ? `${device}.${metric}` : metric;
}

// readingName is the reading's own name, as the live stream carries it.
export function readingName(device, metric) {
  return device && metric.startsWith(device + '.') ? metric.slice(device.length + 1) : metric;
}

// interval picks the resolution for a range: raw points up to two hours
// (the simulator's 500 ms polls stay under the API's 11000-point limit
// up to about 90 minutes; agents usually poll slower), minute buckets up
// to two days, hours above.
export function interval(seconds) {
  if (seconds <= 2 * 3600) return '';
  if (seconds <= 2 * 86400) return '1m';
  return '1h';
}

// loadSeries reads one metric of one agent over the last `seconds`
// (unix seconds in x, numbers or null in y). Bucketed ranges chart the
// bucket average. A raw range over the API's point limit falls back to
// minute buckets.
export async function loadSeries(api, agent, metric, seconds, {end = Date.now(), step} = {}) {
  const start = new Date(end - seconds * 1000).toISOString();
  let iv = step === undefined ? interval(seconds) : step;
  const get = (i) => api.get(`/readings/${encodeURIComponent(agent)}/timeseries` +
    qs({metric, start, end: new Date(end).toISOString(), interval: i}));
  let res;
  try {
    res = await get(iv);
  } catch (err) {
    if (iv !== '' || err.code !== 'limit_exceeded') throw err;
    iv = '1m';
    res = await get(iv);
  }
  const x = [];
  const y = [];
  for (const p of res.points || []) {
    x.push(Date.parse(p.time) / 1000);
    y.push(num(iv ? p.avg : p.value));
  }
  return {x, y, interval: iv, points: res.points || []};
}

// align puts series [{x, y}] on one time axis: the union of their times,
// null where a series has no point.
export function align(list) {
  const times = [...new Set(list.flatMap(s => s.x))].sort((a, b) => a - b);
  const at = new Map(times.map((t, i) => [t, i]));
  const ys = list.map(s => {
    const out = new Array(times.length).fill(null);
    s.x.forEach((t, i) => { out[at.get(t)] = s.y[i]; });
    return out;
  });
  return {x: times, ys};
}

// liveReadings flattens one `metrics` event of the live stream into
// {deviceName, name, value, unit, quality, t (unix seconds)} readings.
export function liveReadings(data) {
  let batch;
  try {
    batch = JSON.parse(data);
  } catch {
    return [];
  }
  const out = [];
  for (const m of Array.isArray(batch) ? batch : [batch]) {
    if (!m || !Array.isArray(m.readings)) continue;
    const base = Date.parse(m.timestamp);
    for (const r of m.readings) {
      const t = r.timestamp ? Date.parse(r.timestamp) : base;
      if (Number.isNaN(t)) continue;
      out.push({deviceName: m.deviceName, name: r.name, value: num(r.value), raw: r.value, unit: r.unit || '',
        quality: r.quality || '', t: t / 1000});
    }
  }
  return out;
}

// qualityWord is what a quality badge says: the stored quality, or
// "—" for none.
export function qualityWord(q) {
  return q ? String(q) : '—';
}
