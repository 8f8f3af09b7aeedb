// A device (one endpoint): live values with their quality, polled every
// max(1 s, the endpoint's poll interval), the adapter's metrics, and a
// chart of the numeric values polled since the page opened (10 minutes).
import {h, replace, badge, fmtTime, fmtNum, fmtAgo} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {timeChart} from '../../lib/chart.js';
import {heading} from '../util.js';

function valueText(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'number') return fmtNum(v, 3);
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export default {
  path: '/devices/:protocol/:device',
  title: 'Device',
  navGroup: 'Endpoints',
  async render(ctx) {
    const {api} = ctx.app;
    const {protocol, device} = ctx.params;
    const path = `/adapters/${encodeURIComponent(protocol)}/devices/${encodeURIComponent(device)}`;
    const {endpoints = []} = await api.get(`/endpoints?protocol=${encodeURIComponent(protocol)}`);
    const ep = endpoints.find(e => e.name === device);
    if (ctx.stale()) return undefined;
    const pollMs = Math.max(1000, (ep && ep.poll_interval) || 1000);
    const state = h('div', {id: 'device-state'});
    const valuesEl = h('div', {id: 'device-values'});
    const metricsEl = h('div', {id: 'device-metrics'});
    const chartEl = h('div', {id: 'device-chart'});
    const live = h('p', {class: 'live', 'data-state': 'retrying', text: `polled every ${pollMs / 1000} s`});
    replace(ctx.root,
      heading(device, ep ? h('a', {class: 'button secondary', href: `#/endpoints/edit/${encodeURIComponent(device)}`, text: 'Edit endpoint'}) : null),
      h('p', {class: 'muted', text: `${protocol}${ep ? ' · ' + ep.uuid : ''}`}), live, state,
      h('h2', {text: 'Values'}), valuesEl,
      h('h2', {text: 'Last 10 minutes'}), chartEl,
      h('h2', {text: 'Metrics'}), metricsEl);

    let chart = null;
    let series = [];
    const stopPoll = every(pollMs, async () => {
      let d;
      try {
        d = await api.get(path);
      } catch (err) {
        live.dataset.state = 'retrying';
        replace(state, errorBox(err));
        return;
      }
      live.dataset.state = 'open';
      const hl = d.health || {};
      replace(state, h('dl', {class: 'props'},
        h('dt', {text: 'Status'}), h('dd', {}, badge(d.status || hl.status || 'unknown')),
        h('dt', {text: 'Communication quality'}), h('dd', {text: `${fmtNum(d.communicationQuality)} %`}),
        h('dt', {text: 'Last seen'}), h('dd', {text: fmtAgo(d.lastSeen)}),
        hl.lastError ? [h('dt', {text: 'Last error'}), h('dd', {class: 'mono', text: hl.lastError})] : null));
      const dps = d.dataPoints || [];
      replace(valuesEl, dps.length ? h('table', {class: 'grid', id: 'values'},
        h('thead', {}, h('tr', {}, ['Data point', 'Value', 'Unit', 'Quality', 'Time'].map(t => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, dps.map(p => h('tr', {'data-point': p.name},
          h('td', {}, p.name, p.register ? h('div', {class: 'muted mono', text: p.register}) : null),
          h('td', {class: 'value', 'data-value': p.name, text: valueText(p.value)}),
          h('td', {text: p.unit || ''}),
          h('td', {}, badge(p.quality || 'UNCERTAIN'), p.qualityCode ? h('span', {class: 'muted', text: ` ${p.qualityCode}`}) : null),
          h('td', {text: fmtTime(p.timestamp)}))))) : h('p', {class: 'empty', text: 'No values yet.'}));
      const names = dps.map(p => p.name);
      if (!chart || names.join('\n') !== series.join('\n')) {
        if (chart) chart.destroy();
        replace(chartEl);
        series = names;
        chart = names.length ? timeChart(chartEl, {series: dps.map(p => ({label: p.name, unit: p.unit})), windowSec: 600, title: `${device} values`}) : null;
      }
      if (chart) chart.push(Date.now() / 1000, dps.map(p => (typeof p.value === 'number' ? p.value : typeof p.value === 'boolean' ? Number(p.value) : null)));
    });
    // Metrics change slowly and exist only for polled devices (501 for
    // pushed values): every 5 s.
    const stopMetrics = every(Math.max(5000, pollMs), async () => {
      try {
        const m = await api.get(`${path}/metrics`);
        const lat = m.pollLatencyMs || {};
        replace(metricsEl, h('dl', {class: 'props'},
          h('dt', {text: 'Polls'}), h('dd', {text: `${m.polls} (${m.pollFailures} failed)`}),
          h('dt', {text: 'Reads'}), h('dd', {text: `${m.readsGood} good, ${m.readsBad} bad, ${fmtNum(m.readRatePerSec)}/s`}),
          h('dt', {text: 'Poll latency'}), h('dd', {text: `last ${fmtNum(lat.last)} ms, avg ${fmtNum(lat.avg)} ms, max ${fmtNum(lat.max)} ms`}),
          h('dt', {text: 'Connect failures'}), h('dd', {text: String(m.connectFailures)}),
          h('dt', {text: 'Since'}), h('dd', {text: fmtTime(m.since)})));
      } catch (err) {
        replace(metricsEl, err.status === 501 ? h('p', {class: 'muted', text: 'This device pushes its values; there are no poll metrics.'}) : errorBox(err));
      }
    });
    return () => {
      stopPoll();
      stopMetrics();
      if (chart) chart.destroy();
    };
  },
};
