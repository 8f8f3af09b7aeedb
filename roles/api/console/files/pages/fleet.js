// One fleet: its members, run state, template and usage events; the
// timeline and the members' statuses follow the tenant's event stream
// (docs/fleets-and-jobs.md).
import {h, replace, table, badge, fmtTime, fmtAgo} from '../../lib/dom.js';
import {submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, detail, isAdmin, ok, userNames} from './admin-common.js';
import {fleetFields, fleetBody} from './fleets.js';

// eventText says what a usage event means in a few words.
function eventText(ev, names) {
  const d = ev.detail || {};
  const agent = d.agentUuid ? (names.get(d.agentUuid) || d.agentUuid) : '';
  switch (ev.kind) {
    case 'created': return `created as ${d.name || ''}`;
    case 'agent_added': return `${agent} joined${d.from ? ' (moved from another fleet)' : ''}`;
    case 'agent_removed': return `${agent} left${d.to ? ' (moved to another fleet)' : ''}`;
    case 'started': return `started (${d.members ?? 0} members)`;
    case 'stopped': return `stopped (${d.members ?? 0} members)`;
    case 'template_changed': return `template is now version ${d.templateVersion}`;
    default: return detail(d);
  }
}

export default {
  path: '/fleets/:id',
  title: 'Fleet',
  navGroup: 'Fleets',
  async render(ctx) {
    const {root, app, params} = ctx;
    const id = params.id;
    const admin = isAdmin(app);
    const title = h('h1', {id: 'page-title', text: 'Fleet'});
    const msg = h('div', {'aria-live': 'polite'});
    const head = h('div');
    const members = h('div');
    const timeline = h('ol', {class: 'timeline', id: 'fleet-events'});
    const live = h('span', {class: 'live', text: 'live'});
    const editBox = h('div');
    let fleet = null;
    let agents = [];
    let events = [];
    const names = new Map();
    let users = new Map();

    const say = (el) => replace(msg, el);
    const fail = (err) => replace(msg, errorBox(err));

    const drawEvents = () => replace(timeline, events.length ? events.map(ev =>
      h('li', {'data-kind': ev.kind},
        h('time', {datetime: ev.at, title: fmtTime(ev.at), text: fmtAgo(ev.at)}), ' ',
        badge(ev.kind.replace(/_/g, ' '), ev.kind), ' ',
        h('span', {text: eventText(ev, names)}),
        h('span', {class: 'muted', title: ev.actor, text: ` · by ${users.get(ev.actor) || ev.actor}`}))) : h('li', {class: 'empty', text: 'No usage event yet.'}));

    const drawHead = () => {
      title.textContent = `Fleet ${fleet.name}`;
      replace(head,
        h('div', {class: 'toolbar'},
          h('span', {}, 'Run state ', h('span', {id: 'fleet-run'}, badge(fleet.runState))),
          admin ? (fleet.runState === 'running'
            ? h('button', {type: 'button', id: 'fleet-stop', class: 'secondary', text: 'Stop every member', onclick: () => run('stop')})
            : h('button', {type: 'button', id: 'fleet-start', text: 'Start every member', onclick: () => run('start')})) : null),
        h('dl', {class: 'props'},
          h('dt', {text: 'Description'}), h('dd', {text: fleet.description || '—'}),
          h('dt', {text: 'Members'}), h('dd', {text: String(fleet.memberCount)}),
          h('dt', {text: 'Template version'}), h('dd', {text: String(fleet.templateVersion)}),
          h('dt', {text: 'Created'}), h('dd', {text: fmtTime(fleet.createdAt)}),
          h('dt', {text: 'Updated'}), h('dd', {text: fmtTime(fleet.updatedAt)}),
          h('dt', {text: 'ID'}), h('dd', {class: 'mono', text: fleet.id})));
    };

    const drawMembers = () => {
      const inFleet = new Set((fleet.members || []).map(a => a.uuid));
      const others = agents.filter(a => !inFleet.has(a.uuid));
      const select = h('select', {id: 'fleet-add-agent', name: 'agentUuid'},
        others.map(a => h('option', {value: a.uuid, text: `${a.name || a.uuid}${a.fleet ? ` (now in ${a.fleet})` : ''}`})));
      const add = others.length ? h('form', {class: 'toolbar', id: 'fleet-add'},
        h('div', {class: 'field'}, h('label', {for: 'fleet-add-agent', text: 'Add an agent'}), select),
        h('button', {type: 'submit', text: 'Add to fleet'}))
        : h('p', {class: 'muted', id: 'fleet-add', text: 'Every agent of the tenant is in this fleet.'});
      if (others.length) add.addEventListener('submit', (e) => {
        e.preventDefault();
        submitting(add, async () => {
          fleet = await app.api.post(`/fleets/${encodeURIComponent(id)}/agents`, {agentUuid: select.value});
          say(ok('Agent added; it receives the fleet\'s template now.'));
          await refresh();
        });
      });
      replace(members, table([
        {label: 'Agent', value: a => h('a', {href: `#/agents/${encodeURIComponent(a.uuid)}`, text: a.name || a.uuid})},
        {label: 'Status', value: a => badge(a.status || 'unknown')},
        {label: 'Last seen', value: a => fmtAgo(a.lastSeen)},
        ...(admin ? [{label: 'Actions', value: a => confirmButton({label: 'Remove', confirm: 'Remove from fleet',
          question: `Take ${a.name || a.uuid} out?`, id: `remove-${a.uuid}`, onConfirm: async () => {
            await app.api.del(`/fleets/${encodeURIComponent(id)}/agents/${encodeURIComponent(a.uuid)}`);
            say(ok(`${a.name || a.uuid} left the fleet.`));
            await refresh();
          }})}] : []),
      ], fleet.members || [], {empty: 'No member yet.'}), admin ? add : null);
    };

    const drawEdit = () => {
      if (!admin) return;
      const form = h('form', {class: 'stack', id: 'fleet-edit'}, fleetFields(fleet),
        h('div', {}, h('button', {type: 'submit', text: 'Save changes'})));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        submitting(form, async () => {
          fleet = await app.api.patch(`/fleets/${encodeURIComponent(id)}`, fleetBody(form));
          say(ok('Fleet saved.'));
          await refresh();
        });
      });
      const del = confirmButton({label: 'Delete fleet', id: 'fleet-delete', question: 'Delete this fleet?', onConfirm: async () => {
        try {
          await app.api.del(`/fleets/${encodeURIComponent(id)}`);
        } catch (err) {
          if (err.status !== 409) throw err;
          // Members keep a fleet from being deleted; say so and offer the
          // forced delete, which takes them out first.
          say(h('div', {class: 'alert error', role: 'alert'}, h('p', {text: err.message}),
            confirmButton({label: 'Delete anyway, taking every member out', id: 'fleet-force-delete',
              question: 'Members keep their own target state and lose the template. Go on?',
              onConfirm: async () => {
                await app.api.del(`/fleets/${encodeURIComponent(id)}?force=true`);
                ctx.navigate('/fleets');
              }})));
          return;
        }
        ctx.navigate('/fleets');
      }});
      replace(editBox, h('details', {class: 'panel'}, h('summary', {text: 'Edit name, description and template'}), form),
        h('div', {class: 'panel danger-zone'}, h('h2', {text: 'Delete'}), del));
    };

    const run = async (what) => {
      try {
        fleet = await app.api.post(`/fleets/${encodeURIComponent(id)}/${what}`);
        say(ok(what === 'stop' ? 'Fleet stopped: every member stops its work.' : 'Fleet started.'));
        await refresh();
      } catch (err) {
        fail(err);
      }
    };

    const loadEvents = async () => {
      const res = await app.api.get(`/fleets/${encodeURIComponent(id)}/usage-events?limit=200`);
      events = res.events || [];
    };
    const refresh = async () => {
      const [f, list] = await Promise.all([app.api.get(`/fleets/${encodeURIComponent(id)}`), app.api.get('/agents')]);
      fleet = f;
      agents = list.agents || [];
      for (const a of agents) names.set(a.uuid, a.name || a.uuid);
      await loadEvents();
      if (ctx.stale()) return;
      drawHead();
      drawMembers();
      drawEvents();
    };

    replace(root, title, msg, head, h('h2', {text: 'Members'}), members,
      h('h2', {}, 'Usage events ', live), timeline, editBox);
    try {
      [users] = await Promise.all([userNames(app), refresh()]);
      drawEvents();
    } catch (err) {
      replace(root, title, errorBox(err));
      return undefined;
    }
    drawEdit();
    return app.stream('/agents/events', (event, data) => {
      const ev = JSON.parse(data);
      if (event === 'fleet' && ev.fleetId === id) {
        if (!events.some(x => x.id === ev.id)) {
          events.unshift(ev);
          drawEvents();
        }
      } else if (event === 'status') {
        const m = (fleet.members || []).find(a => a.uuid === ev.agentUuid);
        if (m) {
          m.status = ev.status;
          if (ev.lastSeen) m.lastSeen = ev.lastSeen;
          drawMembers();
        }
      }
    }, (state) => { live.dataset.state = state; });
  },
};
