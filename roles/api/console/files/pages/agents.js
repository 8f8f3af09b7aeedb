// The tenant's agents with their status, kept current by the tenant's
// status stream.
import {h, replace, table, badge, fmtAgo} from '../../lib/dom.js';
import {errorBox} from '../../lib/router.js';

export default {
  path: '/agents',
  title: 'Agents',
  nav: 'Agents',
  async render(ctx) {
    const {root, app} = ctx;
    const list = h('div');
    const live = h('span', {class: 'live', text: 'live'});
    replace(root, h('h1', {id: 'page-title', text: 'Agents'}), h('p', {}, live), list);
    let agents = [];
    const draw = () => replace(list, table([
      {label: 'Name', value: a => h('a', {href: `#/agents/${encodeURIComponent(a.uuid)}`, text: a.name || a.uuid})},
      {label: 'Status', value: a => badge(a.status || 'unknown')},
      {label: 'Last seen', value: a => h('span', {title: a.lastSeen || '', text: fmtAgo(a.lastSeen)})},
      {label: 'Version', value: a => a.version || '—'},
    ], agents, {empty: 'No agent yet. Create a provisioning key, then provision an agent with it.'}));
    try {
      const res = await app.api.get('/agents');
      agents = res.agents || res.items || [];
    } catch (err) {
      replace(list, errorBox(err));
      return undefined;
    }
    draw();
    return app.stream('/agents/events', (event, data) => {
      if (event !== 'status') return;
      const ev = JSON.parse(data);
      const a = agents.find(x => x.uuid === (ev.agentUuid || ev.uuid));
      if (a) {
        a.status = ev.status;
        if (ev.lastSeen) a.lastSeen = ev.lastSeen;
        draw();
      }
    }, (state) => { live.dataset.state = state; });
  },
};
