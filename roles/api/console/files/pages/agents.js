// The tenant's agents with their status, tags and, where they have one,
// their place on a map; statuses stay current from the tenant's event
// stream (docs/agents-api.md, "Status events").
import {h, replace, table, badge, fmtAgo} from '../../lib/dom.js';
import {errorBox} from '../../lib/router.js';
import {agentMap} from './map.js';

// matches tells whether agent a passes the filters: text (in name,
// UUID, version, fleet or any tag), a "key=value" tag and a status.
export function matches(a, {text = '', tag = '', status = ''}) {
  if (status && a.status !== status) return false;
  const tags = a.tags || {};
  if (tag) {
    const i = tag.indexOf('=');
    if (tags[tag.slice(0, i)] !== tag.slice(i + 1)) return false;
  }
  if (!text) return true;
  const t = text.toLowerCase();
  return [a.name, a.uuid, a.version, a.fleet, ...Object.entries(tags).map(([k, v]) => `${k}=${v}`)]
    .some(s => s && String(s).toLowerCase().includes(t));
}

function tagChips(a, pick) {
  const entries = Object.entries(a.tags || {}).sort(([x], [y]) => x.localeCompare(y));
  if (!entries.length) return h('span', {class: 'muted', text: '—'});
  return h('span', {class: 'tags'}, entries.map(([k, v]) =>
    h('button', {type: 'button', class: 'tag', title: `Show only agents tagged ${k}=${v}`, onclick: () => pick(`${k}=${v}`), text: `${k}=${v}`})));
}

export default {
  path: '/agents',
  title: 'Agents',
  nav: 'Agents',
  async render(ctx) {
    const {root, app} = ctx;
    const list = h('div');
    const mapBox = h('div');
    const live = h('span', {class: 'live', text: 'live'});
    const count = h('span', {class: 'muted', id: 'agent-count'});
    const textIn = h('input', {id: 'agent-filter', type: 'search', placeholder: 'name, UUID, version, fleet or tag', autocomplete: 'off'});
    const tagIn = h('select', {id: 'agent-tag'});
    const statusIn = h('select', {id: 'agent-status'},
      ['', 'online', 'offline', 'never-seen', 'disabled'].map(s => h('option', {value: s, text: s || 'any status'})));
    const toolbar = h('div', {class: 'toolbar', role: 'search'},
      h('div', {class: 'field'}, h('label', {for: 'agent-filter', text: 'Filter'}), textIn),
      h('div', {class: 'field'}, h('label', {for: 'agent-tag', text: 'Tag'}), tagIn),
      h('div', {class: 'field'}, h('label', {for: 'agent-status', text: 'Status'}), statusIn),
      count);
    replace(root, h('h1', {id: 'page-title', text: 'Agents'}), h('p', {}, live), toolbar, mapBox, list);

    let agents = [];
    let located = [];
    let map = null;
    const filters = () => ({text: textIn.value.trim(), tag: tagIn.value, status: statusIn.value});
    const pickTag = (t) => {
      tagIn.value = t;
      draw();
    };
    const fillTags = () => {
      const seen = new Set();
      for (const a of agents) for (const [k, v] of Object.entries(a.tags || {})) seen.add(`${k}=${v}`);
      const keep = tagIn.value;
      replace(tagIn, h('option', {value: '', text: 'any tag'}), [...seen].sort().map(t => h('option', {value: t, text: t})));
      tagIn.value = seen.has(keep) ? keep : '';
    };
    const draw = () => {
      const f = filters();
      const shown = agents.filter(a => matches(a, f));
      count.textContent = `${shown.length} of ${agents.length}`;
      replace(list, table([
        {label: 'Name', value: a => h('a', {href: `#/agents/${encodeURIComponent(a.uuid)}`, 'data-agent': a.uuid, text: a.name || a.uuid})},
        {label: 'Status', value: a => badge(a.status || 'unknown')},
        {label: 'Fleet', value: a => a.fleetId ? h('a', {href: `#/fleets/${encodeURIComponent(a.fleetId)}`, text: a.fleet}) : '—'},
        {label: 'Tags', value: a => tagChips(a, pickTag)},
        {label: 'Last seen', value: a => h('span', {title: a.lastSeen || '', text: fmtAgo(a.lastSeen)})},
        {label: 'Version', value: a => a.version || '—'},
      ], shown, {empty: agents.length ? 'No agent matches the filters.' : 'No agent yet. Create a provisioning key, then provision an agent with it.'}));
      if (map) map.update(located.filter(a => matches({...(agents.find(x => x.uuid === a.uuid) || a), ...a}, f)));
    };
    for (const el of [textIn, tagIn, statusIn]) el.addEventListener('input', draw);

    try {
      const [res, loc] = await Promise.all([app.api.get('/agents'), app.api.get('/agents/locations')]);
      agents = res.agents || [];
      located = loc.locations || [];
    } catch (err) {
      replace(list, errorBox(err));
      return undefined;
    }
    if (ctx.stale()) return undefined;
    if (located.length) {
      map = agentMap(located);
      replace(mapBox, h('h2', {text: 'Map'}), map.el);
    }
    fillTags();
    draw();
    return app.stream('/agents/events', (event, data) => {
      if (event !== 'status') return;
      const ev = JSON.parse(data);
      const uuid = ev.agentUuid || ev.uuid;
      for (const a of [agents.find(x => x.uuid === uuid), located.find(x => x.uuid === uuid)]) {
        if (!a) continue;
        a.status = ev.status;
        if (ev.lastSeen) a.lastSeen = ev.lastSeen;
      }
      draw();
    }, (state) => { live.dataset.state = state; });
  },
};
