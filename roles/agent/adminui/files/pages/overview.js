// Overview: the agent's health, mode and host resources, refreshed every
// few seconds.
import {h, replace, fmtBytes, badge, fmtNum} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, pct} from '../util.js';

function card(label, value, sub = '') {
  return h('div', {class: 'card', 'data-card': label},
    h('div', {class: 'label', text: label}),
    h('div', {class: 'value', text: value}),
    sub ? h('div', {class: 'muted', text: sub}) : null);
}

function uptime(s) {
  if (typeof s !== 'number') return '—';
  const d = Math.floor(s / 86400);
  const hh = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return d ? `${d} d ${hh} h` : hh ? `${hh} h ${m} min` : `${m} min`;
}

export default {
  path: '/',
  title: 'Overview',
  nav: 'Overview',
  render(ctx) {
    const {api} = ctx.app;
    const cards = h('div', {class: 'cards', id: 'overview-cards'});
    const problems = h('div');
    const subsystems = h('div');
    replace(ctx.root, heading('Overview'), problems, cards, h('h2', {text: 'Subsystems'}), subsystems);
    return every(3000, async () => {
      let stats, report, device;
      try {
        [stats, report, device] = await Promise.all([api.get('/dashboard/stats'), api.get('/health/report'), api.get('/device')]);
      } catch (err) {
        replace(problems, errorBox(err));
        return;
      }
      replace(problems, report.overall ? null : h('div', {class: 'alert error', role: 'alert',
        text: `Unhealthy: ${(report.report.unhealthySubsystems || []).join(', ') || 'see below'}`}));
      const net = stats.network || {};
      replace(cards,
        h('div', {class: 'card', 'data-card': 'Health'}, h('div', {class: 'label', text: 'Health'}),
          h('div', {class: 'value'}, badge(report.overall ? 'healthy' : 'unhealthy')),
          h('div', {class: 'muted', text: `${report.state} · run state ${report.runState || '—'}`})),
        card('Mode', device.mode || '—', device.provisioned ? 'provisioned' : 'not provisioned'),
        card('CPU', pct(stats.cpu_usage)),
        card('Memory', pct(stats.memory_percent), `${fmtBytes(stats.memory_used)} of ${fmtBytes(stats.memory_total)}`),
        card('Disk', pct(stats.storage_percent), `${fmtBytes(stats.storage_used)} of ${fmtBytes(stats.storage_total)}`),
        card('Network', `${fmtBytes(net.rx_bytes_per_sec)}/s in`, `${fmtBytes(net.tx_bytes_per_sec)}/s out`),
        card('Uptime', uptime(stats.uptime), stats.hostname || ''),
        card('Device', device.name || '—', device.uuid || ''));
      const subs = (report.report && report.report.subsystems) || [];
      replace(subsystems, h('table', {class: 'grid'},
        h('thead', {}, h('tr', {}, ['Subsystem', 'State', 'Detail'].map(t => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, subs.map(s => h('tr', {},
          h('td', {text: s.name}), h('td', {}, badge(s.healthy ? 'healthy' : 'unhealthy')), h('td', {text: s.error || ''}))),
        ((report.report && report.report.phases) || []).map(p => h('tr', {},
          h('td', {text: `phase ${p.name}`}), h('td', {}, badge(p.healthy ? 'ok' : 'failed')),
          h('td', {text: `${fmtNum(p.durationMs)} ms, ${p.attempts} attempt(s)${p.error ? ' — ' + p.error : ''}`}))))));
    });
  },
};
