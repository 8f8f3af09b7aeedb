// Jobs: the executions the cloud sent this agent, newest first
// (read-only: the cloud dispatches and cancels them).
import {h, replace, badge, fmtTime} from '../../lib/dom.js';
import {every} from '../../lib/sse.js';
import {errorBox} from '../../lib/router.js';
import {heading} from '../util.js';

export default {
  path: '/jobs',
  title: 'Jobs',
  nav: 'Jobs',
  render(ctx) {
    const {api} = ctx.app;
    const list = h('div', {id: 'jobs'});
    replace(ctx.root, heading('Jobs'), h('p', {class: 'muted', text: 'Jobs come from the cloud; this list only shows them.'}), list);
    return every(10000, async () => {
      let r;
      try {
        r = await api.get('/jobs?limit=100');
      } catch (err) {
        replace(list, errorBox(err));
        return;
      }
      const jobs = r.jobs || [];
      replace(list, jobs.length ? h('table', {class: 'grid'},
        h('thead', {}, h('tr', {}, ['Job', 'Handler', 'Status', 'Received', 'Ended', 'Result'].map(t => h('th', {scope: 'col', text: t})))),
        h('tbody', {}, jobs.map(j => h('tr', {},
          h('td', {class: 'mono', text: j.jobId}), h('td', {text: j.handler}),
          h('td', {}, badge(j.status || j.state, (j.status || j.state || '').replace('_', '-')), j.statusReason ? h('div', {class: 'muted', text: j.statusReason}) : null),
          h('td', {text: fmtTime(j.receivedAt)}), h('td', {text: fmtTime(j.endedAt)}),
          h('td', {class: 'mono', text: j.result || ''}))))) : h('p', {class: 'empty', text: 'No job has come yet.'}));
    });
  },
};
