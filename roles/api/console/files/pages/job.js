// One job and each agent's execution of it. Statuses move live from the
// tenant's event stream (job events, docs/fleets-and-jobs.md "Events");
// while the stream is down the page reads the job every 5 s instead.
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, isAdmin, ok} from './admin-common.js';

const ENDED = new Set(['succeeded', 'failed', 'timed_out', 'cancelled']);

function outcome(x) {
  const parts = [];
  if (x.result) parts.push(h('pre', {class: 'result', text: x.result}));
  if (x.exitData) parts.push(h('details', {}, h('summary', {text: 'Exit data'}), h('pre', {text: JSON.stringify(x.exitData, null, 2)})));
  return parts.length ? parts : '—';
}

export default {
  path: '/jobs/:jobId',
  title: 'Job',
  navGroup: 'Jobs',
  async render(ctx) {
    const {root, app, params} = ctx;
    const id = params.jobId;
    const admin = isAdmin(app);
    const title = h('h1', {id: 'page-title', text: 'Job'});
    const msg = h('div', {'aria-live': 'polite'});
    const head = h('div');
    const execBox = h('div', {id: 'job-executions'});
    const live = h('span', {class: 'live', text: 'live'});
    let job = null;
    let names = new Map();

    const drawHead = () => {
      title.textContent = `Job ${job.handler} · ${job.jobId.slice(0, 8)}`;
      const counts = Object.entries(job.counts || {}).filter(([, n]) => n).map(([s, n]) => `${s} ${n}`).join(', ');
      replace(head,
        h('div', {class: 'toolbar'}, h('span', {}, 'Status ', h('span', {id: 'job-status'}, badge(job.status))),
          admin && job.status === 'in_progress' ? confirmButton({label: 'Cancel job', id: 'job-cancel', question: 'Cancel every execution that has not ended?',
            onConfirm: async () => {
              await app.api.post(`/jobs/executions/${encodeURIComponent(id)}/cancel`);
              replace(msg, ok('Job cancelled.'));
              await load();
            }}) : null),
        h('dl', {class: 'props'},
          h('dt', {text: 'Job ID'}), h('dd', {class: 'mono', text: job.jobId}),
          h('dt', {text: 'Handler'}), h('dd', {text: job.handler}),
          h('dt', {text: 'Params'}), h('dd', {class: 'mono', text: JSON.stringify(job.params || {})}),
          h('dt', {text: 'Targets'}), h('dd', {class: 'mono', text: JSON.stringify(job.targets || {})}),
          h('dt', {text: 'Rollout'}), h('dd', {text: job.rollout && job.rollout.agentsPerMinute ? `${job.rollout.agentsPerMinute} agents a minute` : 'all at once'}),
          h('dt', {text: 'Timeout'}), h('dd', {text: job.timeoutSeconds ? `${job.timeoutSeconds} s` : 'the agent\'s own maximum'}),
          h('dt', {text: 'Executions'}), h('dd', {text: `${job.total}${counts ? ` (${counts})` : ''}`}),
          h('dt', {text: 'Created'}), h('dd', {text: fmtTime(job.createdAt)}),
          h('dt', {text: 'Completed'}), h('dd', {text: fmtTime(job.completedAt)})));
    };
    const drawExecs = () => replace(execBox, table([
      {label: 'Agent', value: x => h('a', {href: `#/agents/${encodeURIComponent(x.agentUuid)}`, text: names.get(x.agentUuid) || x.agentUuid})},
      {label: 'Status', value: x => h('span', {class: 'exec-status', 'data-agent': x.agentUuid, 'data-status': x.status}, badge(x.status))},
      {label: 'Reason', value: x => x.statusReason || '—'},
      {label: 'Started', value: x => fmtTime(x.startedAt)},
      {label: 'Finished', value: x => fmtTime(x.finishedAt)},
      {label: 'Outcome', value: outcome},
      ...(admin ? [{label: 'Actions', value: x => ENDED.has(x.status) ? '—' : confirmButton({label: 'Cancel', question: 'Cancel this execution?',
        onConfirm: async () => {
          await app.api.post(`/agents/${encodeURIComponent(x.agentUuid)}/jobs/${encodeURIComponent(id)}/cancel`);
          await load();
        }})}] : []),
    ], job.executions || [], {empty: 'No execution.'}));

    const load = async () => {
      const j = await app.api.get(`/jobs/executions/${encodeURIComponent(id)}`);
      if (ctx.stale()) return;
      job = j;
      drawHead();
      drawExecs();
    };

    replace(root, title, msg, head, h('h2', {}, 'Executions ', live), execBox);
    try {
      const [agents] = await Promise.all([app.api.get('/agents'), load()]);
      names = new Map((agents.agents || []).map(a => [a.uuid, a.name || a.uuid]));
      if (job) drawExecs();
    } catch (err) {
      replace(root, title, errorBox(err));
      return undefined;
    }

    // An ended execution has a result and exit data the event does not
    // carry: read the job once more, at most once a second.
    let pending = null;
    const reread = () => {
      if (pending) return;
      pending = setTimeout(() => {
        pending = null;
        load().catch(err => replace(msg, errorBox(err)));
      }, 1000);
    };
    let fallback = null;
    const stopStream = app.stream('/agents/events', (event, data) => {
      if (event !== 'job') return;
      const ev = JSON.parse(data);
      if (ev.jobId !== id) return;
      if (!ev.agentUuid) {
        job.status = ev.status;
        drawHead();
        reread();
        return;
      }
      const x = (job.executions || []).find(e => e.agentUuid === ev.agentUuid);
      if (x) {
        x.status = ev.status;
        x.statusReason = ev.statusReason || '';
        if (ev.status === 'in_progress' && !x.startedAt) x.startedAt = ev.at;
        if (ENDED.has(ev.status)) x.finishedAt = ev.at;
        drawExecs();
      }
      if (ENDED.has(ev.status)) reread();
    }, (state) => {
      live.dataset.state = state;
      if (state === 'retrying' && !fallback) fallback = every(5000, load);
      if (state !== 'retrying' && fallback) {
        fallback();
        fallback = null;
      }
      // Whatever moved before the stream (re)opened.
      if (state === 'open') reread();
    });
    return () => {
      clearTimeout(pending);
      if (fallback) fallback();
      stopStream();
    };
  },
};
