// Simulation: the scenarios of simulation mode (docs/simulation.md) with
// their devices and readings, start and stop each, stop all; refreshed
// every 3 s while the page is shown. The routes answer 404 while the
// mode is off, and the page then says how to turn it on.
import {h, replace, badge, fmtTime, fmtNum, table} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, status, run} from '../util.js';

function offNote(err) {
  return h('div', {id: 'simulation-off', class: 'card'},
    h('p', {text: 'Simulation mode is off on this agent, so it has no scenarios.'}),
    h('p', {}, 'Turn it on with the setting ', h('code', {text: 'agent.simulation_mode'}), ' (environment ',
      h('code', {text: 'SIMULATION_MODE=true'}), ') and restart the agent, or run ',
      h('code', {text: 'edgeplat all-in-one --simulate'}), ' (', h('code', {text: '--simulate=fault'}),
      ' starts another scenario).'),
    h('p', {class: 'muted', text: `The agent answered: ${err.message}`}));
}

function devicesCell(s) {
  const devs = s.devices || [];
  if (!devs.length) return '—';
  return h('ul', {class: 'plain'}, devs.map(d => h('li', {'data-sim-device': d.name},
    h('a', {href: `#/devices/simulated/${encodeURIComponent(d.name)}`, class: 'mono', text: d.name}), ' ',
    d.running ? badge('running', 'online') : badge('stopped', 'stopped'),
    ' ', h('span', {'data-device-readings': d.name, text: `${fmtNum(d.readings ?? 0)} readings`}))));
}

export default {
  path: '/simulation',
  title: 'Simulation',
  nav: 'Simulation',
  render(ctx) {
    const {api} = ctx.app;
    const msg = h('div', {id: 'simulation-status', 'aria-live': 'polite'});
    const body = h('div', {id: 'simulation'});
    const stopAll = h('button', {type: 'button', class: 'secondary', id: 'stop-all', text: 'Stop all', hidden: true,
      onclick: async () => {
        stopAll.disabled = true;
        const r = await run(msg, () => api.post('/simulation/stop-all'));
        stopAll.disabled = false;
        if (r) status(msg, 'ok', r.stopped && r.stopped.length ? `Stopped: ${r.stopped.join(', ')}.` : 'No scenario was running.');
        await load();
      }});
    const act = (s, verb) => async (e) => {
      e.currentTarget.disabled = true;
      const r = await run(msg, () => api.post(`/simulation/scenarios/${encodeURIComponent(s.name)}/${verb}`));
      if (r) status(msg, 'ok', r.message || `${s.name}: ${verb}`);
      await load();
    };
    // The table is rebuilt only when what runs changes; otherwise the
    // counts change in place, so the keyboard focus stays where it is.
    let shown = '';
    const counts = (scenarios) => {
      for (const s of scenarios) {
        const el = body.querySelector(`[data-readings="${CSS.escape(s.name)}"]`);
        if (el) el.textContent = fmtNum(s.readings ?? 0);
        for (const d of s.devices || []) {
          const de = body.querySelector(`[data-device-readings="${CSS.escape(d.name)}"]`);
          if (de) de.textContent = `${fmtNum(d.readings ?? 0)} readings`;
        }
      }
    };
    const load = async () => {
      let scenarios;
      try {
        scenarios = (await api.get('/simulation/status')).scenarios || [];
      } catch (err) {
        stopAll.hidden = true;
        shown = '';
        replace(body, err.status === 404 ? offNote(err) : errorBox(err));
        return;
      }
      stopAll.hidden = false;
      const key = JSON.stringify(scenarios.map(s => [s.name, s.running, s.started_at, (s.devices || []).map(d => [d.name, d.running])]));
      if (key === shown) {
        counts(scenarios);
        return;
      }
      shown = key;
      replace(body, table([
        {label: 'Scenario', value: s => h('span', {class: 'mono', 'data-scenario': s.name, text: s.name})},
        {label: 'What it does', value: s => s.description || ''},
        {label: 'State', value: s => h('span', {'data-running': s.name},
          s.running ? badge('running', 'online') : badge('stopped', 'stopped'))},
        {label: 'Since', value: s => s.running ? fmtTime(s.started_at) : '—'},
        {label: 'Seed', value: s => s.running ? String(s.seed) : '—'},
        {label: 'Devices', value: devicesCell},
        {label: 'Readings', value: s => h('span', {'data-readings': s.name, text: fmtNum(s.readings ?? 0)})},
        {label: '', value: s => s.running
          ? h('button', {type: 'button', class: 'secondary', 'data-stop': s.name, text: 'Stop', 'aria-label': `Stop ${s.name}`, onclick: act(s, 'stop')})
          : h('button', {type: 'button', 'data-start': s.name, text: 'Start', 'aria-label': `Start ${s.name}`, onclick: act(s, 'start')})},
      ], scenarios, {empty: 'This build has no scenario.'}));
    };
    replace(ctx.root, heading('Simulation', stopAll),
      h('p', {class: 'muted', text: 'Simulated devices run in memory, tagged protocol "simulated"; a restart leaves none running.'}),
      msg, body);
    return every(3000, load);
  },
};
