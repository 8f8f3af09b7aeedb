// One agent: its record and live status, then tabs for its devices,
// latest readings, system metrics, apps, logs, target state (with
// history) and jobs. The status and the latest readings follow the
// agent's live stream; the jobs follow the tenant's event stream; the
// apps are read again every 5 s while shown.
import {h, replace, table, badge, fmtAgo, fmtTime, fmtNum, fmtBytes} from '../../lib/dom.js';
import {qs} from '../../lib/api.js';
import {errorBox} from '../../lib/router.js';
import {field, submitting, showErrors} from '../../lib/form.js';
import {liveReadings, qualityWord} from './readings-data.js';

const tabs = [
  ['devices', 'Devices'], ['readings', 'Latest readings'], ['system', 'System metrics'], ['apps', 'Apps'], ['logs', 'Logs'],
  ['target', 'Target state'], ['jobs', 'Jobs'],
];

export function deviceHref(agent, device) {
  return `#/agents/${encodeURIComponent(agent)}/devices/${encodeURIComponent(device)}`;
}

export default {
  path: '/agents/:uuid',
  title: 'Agent',
  navGroup: 'Agents',
  async render(ctx) {
    const {root, app, params, query} = ctx;
    const uuid = params.uuid;
    const agent = await app.api.get(`/agents/${encodeURIComponent(uuid)}`);
    const status = h('span', {id: 'agent-status'}, badge(agent.status || 'unknown'));
    const lastSeen = h('span', {id: 'agent-last-seen', title: agent.lastSeen || '', text: fmtAgo(agent.lastSeen)});
    const live = h('span', {class: 'live', text: 'live'});
    const tags = Object.entries(agent.tags || {});
    const panel = h('div', {class: 'tab-panel', role: 'tabpanel', id: 'agent-tab-panel', tabindex: '0'});
    const current = tabs.some(([k]) => k === query.get('tab')) ? query.get('tab') : 'devices';
    const buttons = tabs.map(([key, label]) => h('button', {type: 'button', role: 'tab', class: 'tab', id: `tab-${key}`,
      'aria-selected': String(key === current), 'aria-controls': 'agent-tab-panel', 'data-tab': key, text: label,
      onclick: () => show(key)}));
    const tablist = h('div', {class: 'tabs', role: 'tablist', 'aria-label': 'Agent sections',
      onkeydown: (e) => {
        const i = tabs.findIndex(([k]) => k === shown);
        const j = e.key === 'ArrowRight' ? (i + 1) % tabs.length : e.key === 'ArrowLeft' ? (i + tabs.length - 1) % tabs.length : -1;
        if (j >= 0) {
          show(tabs[j][0]);
          buttons[j].focus();
        }
      }}, buttons);

    replace(root,
      h('p', {class: 'crumbs'}, h('a', {href: '#/agents', text: 'Agents'}), ' / '),
      h('h1', {id: 'page-title', text: agent.name || agent.uuid}),
      h('div', {class: 'panel'}, h('dl', {class: 'props'},
        h('dt', {text: 'Status'}), h('dd', {}, status, ' ', live),
        h('dt', {text: 'Last seen'}), h('dd', {}, lastSeen),
        h('dt', {text: 'UUID'}), h('dd', {class: 'mono', text: agent.uuid}),
        h('dt', {text: 'Version'}), h('dd', {text: agent.version || '—'}),
        h('dt', {text: 'Fleet'}), h('dd', {text: agent.fleet || '—'}),
        h('dt', {text: 'Tags'}), h('dd', {}, tags.length ? tags.map(([k, v]) => h('span', {class: 'tag', text: `${k}=${v}`})) : '—'),
        h('dt', {text: 'Dashboard'}), h('dd', {}, h('a', {href: `#/dashboards/${encodeURIComponent(agent.uuid)}`, text: 'Open the dashboard'})))),
      tablist, panel);

    // Sections that take live data register here while they are shown.
    const onReadings = new Set();
    const onJob = new Set();
    let shown = null;
    let leaveTab = () => {};
    const show = (key) => {
      if (key === shown) return;
      shown = key;
      leaveTab();
      onReadings.clear();
      onJob.clear();
      buttons.forEach(b => b.setAttribute('aria-selected', String(b.dataset.tab === key)));
      buttons.forEach(b => b.setAttribute('tabindex', b.dataset.tab === key ? '0' : '-1'));
      const area = h('div');
      replace(panel, area);
      const sec = {area, app, agent, onReadings, onJob, stale: () => ctx.stale() || shown !== key};
      const result = sections[key](sec);
      leaveTab = () => {};
      Promise.resolve(result).then(fn => {
        if (typeof fn === 'function') {
          if (shown === key) leaveTab = fn;
          else fn();
        }
      }).catch(err => { if (shown === key) replace(area, errorBox(err)); });
    };
    show(current);

    const closeStream = app.stream(`/agents/${encodeURIComponent(uuid)}/stream`, (event, data) => {
      if (event === 'status') {
        const ev = JSON.parse(data);
        replace(status, badge(ev.status || 'unknown'));
        if (ev.lastSeen) {
          agent.lastSeen = ev.lastSeen;
          lastSeen.title = ev.lastSeen;
          lastSeen.textContent = fmtAgo(ev.lastSeen);
        }
      } else if (event === 'metrics') {
        const rs = liveReadings(data);
        if (rs.length) {
          // A batch is traffic: the agent was just heard from.
          lastSeen.textContent = fmtAgo(Date.now());
          for (const fn of onReadings) fn(rs);
        }
      }
    }, (state) => { live.dataset.state = state; });
    const closeEvents = app.stream('/agents/events', (event, data) => {
      if (event !== 'job') return;
      const ev = JSON.parse(data);
      if (ev.agentUuid === agent.uuid) for (const fn of onJob) fn(ev);
    });
    return () => {
      closeStream();
      closeEvents();
      leaveTab();
    };
  },
};

// notFoundAs shows a 404 as a sentence (an agent that has not reported
// that yet) and rethrows anything else.
function notFoundAs(area, text) {
  return (err) => {
    if (err.status !== 404) throw err;
    replace(area, h('p', {class: 'empty', text}));
  };
}

const sections = {
  async devices({area, app, agent}) {
    const [health, config] = await Promise.all([
      app.api.get(`/agents/${agent.uuid}/device-health`).catch(err => (err.status === 404 ? null : Promise.reject(err))),
      app.api.get(`/agents/${agent.uuid}/devices`),
    ]);
    const byName = new Map();
    for (const d of config.devices || []) byName.set(d.name, {name: d.name, protocol: d.protocol, enabled: d.enabled !== false});
    for (const d of (health && health.devices) || []) byName.set(d.name, {...byName.get(d.name), ...d});
    const rows = [...byName.values()].sort((a, b) => a.name.localeCompare(b.name));
    replace(area,
      health ? h('p', {class: 'muted', text: `State report ${fmtAgo(health.receivedAt)}${health.stale ? ' (stale)' : ''}.`}) :
        h('p', {class: 'muted', text: 'The agent has sent no state report yet: devices are shown as configured.'}),
      table([
        {label: 'Device', value: d => h('a', {href: deviceHref(agent.uuid, d.name), text: d.name})},
        {label: 'Protocol', value: d => d.protocol || '—'},
        {label: 'Status', value: d => badge(d.status || (d.enabled ? 'configured' : 'disabled'))},
        {label: 'Quality', value: d => (typeof d.communicationQuality === 'number' ? `${Math.round(d.communicationQuality * 100)} %` : '—')},
        {label: 'Last poll', value: d => h('span', {title: d.lastPoll || '', text: d.lastPoll ? fmtAgo(d.lastPoll) : '—'})},
        {label: 'Polls (failed)', value: d => (d.polls !== undefined ? `${d.polls} (${d.pollFailures || 0})` : '—')},
        {label: 'Last error', value: d => d.lastError || '—'},
      ], rows, {empty: 'No device is configured on this agent.', caption: 'Devices'}));
  },

  async readings({area, app, agent, onReadings}) {
    const res = await app.api.get(`/readings/${agent.uuid}/latest`);
    const rows = new Map((res.readings || []).map(r => [r.metricName, r]));
    const draw = () => {
      const list = [...rows.values()].sort((a, b) => a.deviceName.localeCompare(b.deviceName) || a.metricName.localeCompare(b.metricName));
      replace(area, table([
        {label: 'Device', value: r => (r.deviceName ? h('a', {href: deviceHref(agent.uuid, r.deviceName), text: r.deviceName}) : '—')},
        {label: 'Metric', value: r => h('span', {class: 'mono', text: r.metricName})},
        {label: 'Value', value: r => h('span', {'data-metric': r.metricName, text: `${fmtNum(r.value)}${r.unit ? ' ' + r.unit : ''}`})},
        {label: 'Quality', value: r => badge(qualityWord(r.quality))},
        {label: 'Time', value: r => h('span', {title: r.time, text: fmtTime(r.time)})},
      ], list, {empty: 'No readings from this agent yet.', caption: 'Latest readings'}),
      res.truncated ? h('p', {class: 'muted', text: 'Only the first readings are shown.'}) : null);
    };
    draw();
    // Live batches replace the rows they carry, at most once a second.
    let pending = false;
    onReadings.add((rs) => {
      for (const r of rs) {
        const name = `${r.deviceName}.${r.name}`;
        rows.set(name, {...rows.get(name), metricName: name, deviceName: r.deviceName, value: r.raw, unit: r.unit, quality: r.quality,
          time: new Date(r.t * 1000).toISOString()});
      }
      if (!pending) {
        pending = true;
        setTimeout(() => { pending = false; draw(); }, 1000);
      }
    });
  },

  async system({area, app, agent}) {
    let rep;
    try {
      rep = await app.api.get(`/agents/${agent.uuid}/metrics`);
    } catch (err) {
      notFoundAs(area, 'The agent has sent no system metrics yet.')(err);
      return;
    }
    const flat = [];
    const walk = (prefix, v) => {
      if (v && typeof v === 'object' && !Array.isArray(v)) {
        for (const [k, x] of Object.entries(v)) walk(prefix ? `${prefix}.${k}` : k, x);
      } else flat.push([prefix, v]);
    };
    walk('', rep.metrics);
    const show = (k, v) => {
      if (typeof v === 'number' && /bytes|memory|disk|mem/i.test(k) && v > 1024) return fmtBytes(v);
      if (typeof v === 'number') return fmtNum(v);
      return Array.isArray(v) ? JSON.stringify(v) : String(v);
    };
    replace(area,
      h('p', {class: 'muted', text: `Reported ${fmtTime(rep.reportedAt)}, received ${fmtAgo(rep.receivedAt)}.`}),
      table([
        {label: 'Metric', value: r => h('span', {class: 'mono', text: r[0]})},
        {label: 'Value', value: r => show(r[0], r[1])},
      ], flat, {empty: 'The report is empty.', caption: 'System metrics'}));
  },

  apps: appsSection,

  logs({area, app, agent, stale}) {
    const form = h('form', {class: 'toolbar', 'aria-label': 'Filter the logs'},
      field({name: 'level', label: 'Level', type: 'select', value: '',
        options: [['', 'All'], ['debug', 'Debug and up'], ['info', 'Info and up'], ['warn', 'Warnings and errors'], ['error', 'Errors']]}),
      field({name: 'q', label: 'Message contains'}),
      h('button', {type: 'submit', text: 'Search'}));
    const list = h('div');
    const more = h('div');
    replace(area, form, list, more);
    let lines = [];
    const draw = () => replace(list, table([
      {label: 'Time', value: l => h('span', {class: 'mono', title: l.timestamp, text: fmtTime(l.timestamp)})},
      {label: 'Level', value: l => badge(l.level || '—', l.level === 'warn' ? 'uncertain' : l.level === 'error' ? 'bad' : 'info')},
      {label: 'Component', value: l => l.component || '—'},
      {label: 'Message', value: l => h('span', {class: 'mono wrap', text: l.message})},
    ], lines, {empty: 'No log lines (the agent ships them with logging.cloudEnabled).', caption: 'Agent logs'}));
    const load = (cursor) => submitting(form, async () => {
      const f = {level: form.elements.level.value, q: form.elements.q.value.trim(), limit: 50, cursor};
      const res = await app.api.get(`/agents/${agent.uuid}/logs${qs(f)}`);
      if (stale()) return;
      lines = cursor ? lines.concat(res.logs || []) : (res.logs || []);
      draw();
      replace(more, res.nextCursor ? h('button', {type: 'button', class: 'secondary', id: 'logs-more', text: 'Older lines',
        onclick: () => load(res.nextCursor)}) : null);
    });
    form.addEventListener('submit', (e) => { e.preventDefault(); load(); });
    return load();
  },

  target: targetSection,

  async jobs({area, app, agent, onJob}) {
    const res = await app.api.get(`/agents/${agent.uuid}/jobs${qs({limit: 50})}`);
    const execs = res.executions || [];
    const draw = () => replace(area, table([
      {label: 'Job', value: e => h('span', {class: 'mono', title: e.jobId, text: e.jobId.slice(0, 8)})},
      {label: 'Handler', value: e => e.handler || '—'},
      {label: 'Status', value: e => h('span', {'data-job': e.jobId}, badge(e.status))},
      {label: 'Reason', value: e => e.statusReason || '—'},
      {label: 'Queued', value: e => fmtTime(e.queuedAt)},
      {label: 'Finished', value: e => (e.finishedAt ? fmtTime(e.finishedAt) : '—')},
    ], execs, {empty: 'No job has run on this agent.', caption: 'Jobs of this agent'}));
    draw();
    onJob.add(async (ev) => {
      const e = execs.find(x => x.jobId === ev.jobId);
      if (e) {
        e.status = ev.status;
        e.statusReason = ev.statusReason || e.statusReason;
        if (/succeeded|failed|timed_out|cancelled/.test(ev.status)) e.finishedAt = ev.at;
        draw();
        return;
      }
      // A job this page has not seen: its execution's fields come from
      // the API.
      try {
        const x = await app.api.get(`/agents/${agent.uuid}/jobs/${ev.jobId}`);
        if (!execs.some(y => y.jobId === x.jobId)) execs.unshift(x.execution || x);
        draw();
      } catch (err) {
        console.warn(err);
      }
    });
  },
};

// appsRefreshMs is how often the apps tab reads the current state again:
// agents report every few seconds, so sooner would show nothing new.
const appsRefreshMs = 5000;

// stateKind colours a service or runtime state: green when it is what a
// working app shows, red when something is wrong, grey otherwise.
function stateKind(state) {
  if (/^(running|connected)$/.test(state)) return 'running';
  if (/^(exited|missing|unreachable|dead)$/.test(state)) return 'bad';
  return 'info';
}

// appsSection shows the apps of the agent's latest state report
// (docs/agents-api.md, Apps in the current state): the container
// runtime, then every service with its target and current state and the
// last error reconciling it. It returns the cleanup of its timer.
async function appsSection({area, app, agent, stale}) {
  const draw = (rep) => {
    const section = rep && rep.state && rep.state.apps;
    if (!section) {
      replace(area, h('p', {class: 'empty', id: 'apps-none',
        text: rep ? 'The agent reports no apps: it manages none, or is a version without them.' : 'The agent has sent no state report yet.'}));
      return;
    }
    const rt = section.runtime || {};
    const rows = [];
    for (const a of section.apps || []) {
      for (const s of a.services || []) rows.push({app: a, svc: s});
    }
    const notes = [];
    if (section.configsOmitted) notes.push('Service configurations were left out to keep the report small.');
    if (section.appsTotal) notes.push(`Only ${(section.apps || []).length} of ${section.appsTotal} apps are shown.`);
    replace(area,
      h('p', {class: 'muted', text: `Reported ${fmtTime(rep.reportedAt)}, received ${fmtAgo(rep.receivedAt)}.`}),
      h('dl', {class: 'props', id: 'apps-runtime'},
        h('dt', {text: 'Container runtime'}),
        h('dd', {'data-runtime': rt.status || 'unknown'}, badge(rt.status || 'unknown', stateKind(rt.status)),
          rt.version ? ` ${rt.version}` : '', rt.error ? h('span', {class: 'mono wrap', text: ` ${rt.error}`}) : '')),
      table([
        {label: 'App', value: r => h('span', {title: `appId ${r.app.appId}`, text: r.app.appName})},
        {label: 'Service', value: r => r.svc.serviceName},
        {label: 'Image', value: r => h('span', {class: 'mono', text: r.svc.imageName || '—'})},
        {label: 'Target', value: r => r.svc.target || '—'},
        {label: 'State', value: r => h('span', {'data-service': `${r.app.appName}/${r.svc.serviceName}`, 'data-state': r.svc.state || ''},
          badge(r.svc.state || 'unknown', stateKind(r.svc.state)))},
        {label: 'Status', value: r => r.svc.status || '—'},
        {label: 'Container', value: r => (r.svc.containerId ? h('span', {class: 'mono', title: r.svc.containerId, text: r.svc.containerId.slice(0, 12)}) : '—')},
        {label: 'Error', value: r => (r.svc.error ? h('span', {class: 'mono wrap',
          text: `${r.svc.error}${r.svc.retries ? ` (attempt ${r.svc.retries}${r.svc.nextRetry ? `, next ${fmtTime(new Date(r.svc.nextRetry).toISOString())}` : ''})` : ''}`}) : '—')},
      ], rows, {empty: 'The agent runs no app.', caption: 'Apps and their services'}),
      notes.length ? h('p', {class: 'muted', text: notes.join(' ')}) : null);
  };
  const load = async () => {
    let rep = null;
    try {
      rep = await app.api.get(`/agents/${agent.uuid}/current-state`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    if (!stale()) draw(rep);
  };
  await load();
  let timer = setTimeout(function again() {
    load().catch(err => console.warn(err)).finally(() => {
      if (!stale()) timer = setTimeout(again, appsRefreshMs);
    });
  }, appsRefreshMs);
  return () => clearTimeout(timer);
}

// targetSection: the agent's own document in an editor, what the agent
// receives when a fleet adds to it, and the history of versions
// (docs/target-state.md, History).
async function targetSection({area, app, agent, stale}) {
  const editor = h('div');
  const histBox = h('div', {id: 'ts-history'});
  const viewer = h('div', {id: 'ts-version'});
  replace(area, editor, h('h2', {text: 'History'}), histBox, viewer);
  const admin = app.user && app.user.role === 'admin';

  const loadState = async () => {
    const ts = await app.api.get(`/agents/${agent.uuid}/target-state`);
    if (stale()) return;
    const text = JSON.stringify(ts.state, null, 2);
    const form = h('form', {class: 'stack wide', id: 'ts-form', 'aria-label': 'Target state'},
      h('p', {class: 'muted', id: 'ts-version-line', 'data-version': String(ts.version),
        text: ts.version ? `Version ${ts.version}, ${fmtTime(ts.updatedAt)}` : 'No target state yet (version 0).'}),
      field({name: 'state', label: 'Document (JSON)', type: 'textarea', value: text, rows: Math.min(30, Math.max(8, text.split('\n').length + 1)),
        help: 'The agent\'s own document (docs/target-state.md). Secrets are references: {"secretRef": "name"}.'}),
      admin ? h('div', {class: 'toolbar'},
        h('button', {type: 'submit', id: 'ts-save', text: 'Save'}),
        h('button', {type: 'button', class: 'secondary', text: 'Discard changes', onclick: () => loadState()})) :
        h('p', {class: 'muted', text: 'Only admins change the target state.'}));
    if (!admin) form.elements.state.readOnly = true;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      let doc;
      try {
        doc = JSON.parse(form.elements.state.value);
      } catch (err) {
        showErrors(form, [{field: 'state', message: `not JSON: ${err.message}`}]);
        return;
      }
      submitting(form, async () => {
        const saved = await app.api.put(`/agents/${agent.uuid}/target-state`, {state: doc});
        await loadState();
        editor.prepend(h('div', {class: 'alert ok', role: 'status', text: `Saved as version ${saved.version}.`}));
        await loadHistory();
      });
    });
    const extra = ts.fleetId && JSON.stringify(ts.effective) !== JSON.stringify(ts.state) ?
      h('details', {}, h('summary', {text: 'What the agent receives, with its fleet\'s template'}),
        h('pre', {text: JSON.stringify(ts.effective, null, 2)})) : null;
    replace(editor, form, extra);
  };

  // who names the author of a version: a user id, or none for a
  // change no user made.
  const who = (id) => (id && id === (app.user && app.user.id) ? 'you' : id || 'the system');
  let versions = [];
  const loadHistory = async (cursor) => {
    const res = await app.api.get(`/agents/${agent.uuid}/target-state/history${qs({limit: 20, cursor})}`);
    if (stale()) return;
    versions = cursor ? versions.concat(res.versions) : res.versions;
    replace(histBox, table([
      {label: 'Version', value: v => h('span', {'data-version': String(v.version), text: String(v.version)})},
      {label: 'When', value: v => h('span', {title: v.updatedAt, text: fmtTime(v.updatedAt)})},
      {label: 'By', value: v => who(v.updatedBy)},
      {label: 'Size', value: v => fmtBytes(v.size)},
      {label: 'Document', value: v => h('button', {type: 'button', class: 'secondary', text: `View version ${v.version}`,
        onclick: () => viewVersion(v.version)})},
    ], versions, {empty: 'No version yet.', caption: 'Versions, newest first (the last 100 are kept)'}),
    res.nextCursor ? h('button', {type: 'button', class: 'secondary', text: 'Older versions', onclick: () => loadHistory(res.nextCursor)}) : null);
  };

  const viewVersion = async (version) => {
    try {
      const ts = await app.api.get(`/agents/${agent.uuid}/target-state/history/${version}`);
      const text = JSON.stringify(ts.state, null, 2);
      replace(viewer, h('div', {class: 'panel'},
        h('h3', {text: `Version ${ts.version}`}),
        h('p', {class: 'muted', text: `${fmtTime(ts.updatedAt)} by ${who(ts.updatedBy)}`}),
        h('pre', {class: 'doc', text}),
        admin ? h('button', {type: 'button', class: 'secondary', text: 'Copy into the editor', onclick: () => {
          const ta = editor.querySelector('textarea[name=state]');
          if (ta) {
            ta.value = text;
            ta.focus();
          }
        }}) : null));
    } catch (err) {
      replace(viewer, errorBox(err));
    }
  };

  await Promise.all([loadState(), loadHistory()]);
}
