// Publishing: the destinations with their connection and offline queue
// (depth, dead letters) from /v1/buffer/status, refreshed every 5 s, and
// the subscriptions that route endpoints to them.
import {h, replace, badge, fmtBytes, fmtNum, fmtTime} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading, confirmButton, run, status} from '../util.js';

function ms(v) {
  if (!v) return '—';
  return v < 1000 ? `${v} ms` : v < 60000 ? `${fmtNum(v / 1000, 1)} s` : `${fmtNum(v / 60000, 1)} min`;
}

export default {
  path: '/publishing',
  title: 'Publishing',
  nav: 'Publishing',
  render(ctx) {
    const {api} = ctx.app;
    const msg = h('div', {id: 'publishing-status'});
    const queue = h('div', {id: 'queue'});
    const dests = h('div', {id: 'destinations'});
    const subs = h('div', {id: 'subscriptions'});
    replace(ctx.root, heading('Publishing',
      h('a', {class: 'button', href: '#/publishing/destinations/new', text: 'New destination'}),
      h('a', {class: 'button secondary', href: '#/publishing/subscriptions/new', text: 'New subscription'})),
    msg,
    h('h2', {text: 'Delivery and offline queues'}), queue,
    h('h2', {text: 'Destinations'}), dests,
    h('h2', {text: 'Subscriptions'}), subs);

    const loadConfig = async () => {
      let ds, ss;
      try {
        [ds, ss] = await Promise.all([api.get('/publish/destinations?includeDisabled=true'), api.get('/publish/subscriptions?includeDisabled=true')]);
      } catch (err) {
        replace(dests, errorBox(err));
        return;
      }
      const names = new Map((ds.publishers || []).map(d => [d.id, d.name]));
      replace(dests, tableOf(['Name', 'Type', 'Enabled', 'Actions'], ds.publishers || [], 'No destination yet.', d => [
        h('a', {href: `#/publishing/destinations/${d.id}`, text: d.name}), d.type, d.enabled ? 'yes' : 'no',
        h('div', {class: 'row-actions'},
          h('a', {class: 'button secondary', href: `#/publishing/destinations/${d.id}`, text: 'Edit', 'aria-label': `Edit ${d.name}`}),
          confirmButton('Delete', () => run(msg, async () => {
            await api.del(`/publish/destinations/${d.id}`);
            status(msg, 'ok', `Destination ${d.name} deleted, with its subscriptions and queue.`);
            await Promise.all([loadConfig(), loadQueue()]);
          })))]));
      replace(subs, tableOf(['Destination', 'Topics', 'Format', 'Route topic', 'Enabled', 'Actions'], ss.subscriptions || [], 'No subscription yet: nothing is published.', s => [
        names.get(s.publish_destination_id) || `#${s.publish_destination_id}`,
        (s.topics || []).join(', ') || 'every endpoint',
        `${s.payload_format} · ${s.compression}`,
        h('span', {class: 'mono', text: (s.route_json && s.route_json.topic) || '—'}),
        s.enabled ? 'yes' : 'no',
        h('div', {class: 'row-actions'},
          h('a', {class: 'button secondary', href: `#/publishing/subscriptions/${s.id}`, text: 'Edit'}),
          confirmButton('Delete', () => run(msg, async () => {
            await api.del(`/publish/subscriptions/${s.id}`);
            status(msg, 'ok', 'Subscription deleted.');
            await loadConfig();
          })))]));
    };
    const loadQueue = async () => {
      let b;
      try {
        b = await api.get('/buffer/status');
      } catch (err) {
        replace(queue, errorBox(err));
        return;
      }
      replace(queue,
        h('p', {class: 'muted', text: `Agent mode ${b.mode}; platform publishing ${b.transportPublishMode || '—'}.`}),
        tableOf(['Destination', 'Connection', 'Mode', 'Queued', 'Oldest', 'Dead letters', 'Delivered', 'Last flush'], b.destinations || [],
          'No destination is running.', d => {
            const w = d.publish || {};
            const t = d.transport || {};
            return [
              h('span', {}, d.name, h('div', {class: 'muted', text: `${d.type}${t.target ? ' · ' + t.target : ''}`})),
              h('span', {}, badge(t.state || (t.connected ? 'connected' : 'disconnected')), t.lastError ? h('div', {class: 'muted', text: t.lastError}) : null),
              w.mode || '—',
              h('span', {'data-queue': d.name, text: `${fmtNum(w.mqttMessageBufferCount)} (${fmtBytes(w.mqttBufferBytes)})`}),
              ms(w.oldestAgeMs),
              h('span', {'data-dead-letters': d.name, text: fmtNum(w.deadLetters)}),
              `${fmtNum(w.delivered)} direct, ${fmtNum(w.replayed)} replayed`,
              fmtTime(w.lastFlushSuccess || w.lastFlushAttempt),
            ];
          }),
        h('p', {class: 'muted', text: 'A record refused while connected is retried up to maxRetries times, then kept as a dead letter of its destination (counted here); deleting the destination discards them.'}));
    };
    loadConfig();
    return every(5000, loadQueue);
  },
};

function tableOf(cols, rows, empty, cells) {
  if (!rows.length) return h('p', {class: 'empty', text: empty});
  return h('table', {class: 'grid'},
    h('thead', {}, h('tr', {}, cols.map(c => h('th', {scope: 'col', text: c})))),
    h('tbody', {}, rows.map(r => h('tr', {}, cells(r).map(c => h('td', {}, c))))));
}
