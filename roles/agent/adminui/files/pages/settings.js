// Settings: GET and PATCH /v1/settings. The API validates; its errors
// show by the field they name, a managed setting's 409 at the top.
import {h, replace} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {heading, status} from '../util.js';

export default {
  path: '/settings',
  title: 'Settings',
  nav: 'Settings',
  async render(ctx) {
    const {api} = ctx.app;
    const {settings: s} = await api.get('/settings');
    if (ctx.stale()) return;
    const msg = h('div', {id: 'settings-status', 'aria-live': 'polite'});
    const a = s.agent || {};
    const form = h('form', {class: 'stack', id: 'settings-form', novalidate: true},
      h('fieldset', {}, h('legend', {text: 'Logging'}),
        field({name: 'logging.level', label: 'Level', type: 'select', value: s.logging.level,
          options: [['debug', 'debug'], ['info', 'info'], ['warn', 'warn'], ['error', 'error']]}),
        field({name: 'logging.cloudEnabled', label: 'Ship log lines to the cloud', type: 'checkbox', value: s.logging.cloudEnabled})),
      h('fieldset', {}, h('legend', {text: 'Intervals (ms)'}), h('div', {class: 'grid2'},
        field({name: 'intervals.statePollMs', label: 'Target-state pull', type: 'number', value: s.intervals.statePollMs}),
        field({name: 'intervals.stateReportMs', label: 'State report', type: 'number', value: s.intervals.stateReportMs}),
        field({name: 'intervals.jobPollMs', label: 'Job poll', type: 'number', value: s.intervals.jobPollMs}))),
      h('fieldset', {}, h('legend', {text: 'Runtime'}),
        field({name: 'runtime.maxMemoryMb', label: 'Restart above (MB, 0 = never)', type: 'number', value: s.runtime.maxMemoryMb})),
      h('button', {type: 'submit', text: 'Save settings'}));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      replace(msg);
      const saved = await submitting(form, () => api.patch('/settings', values(form)));
      if (saved) status(msg, 'ok', 'Settings saved.');
    });
    replace(ctx.root, heading('Settings'), msg, form,
      h('h2', {text: 'Agent'}), h('dl', {class: 'props'},
        h('dt', {text: 'UUID'}), h('dd', {class: 'mono', text: a.uuid || '—'}),
        h('dt', {text: 'Name'}), h('dd', {text: a.name || '—'}),
        h('dt', {text: 'Version'}), h('dd', {text: a.version || '—'}),
        h('dt', {text: 'Provisioned'}), h('dd', {text: a.provisioned ? 'yes' : 'no'}),
        h('dt', {text: 'Cloud API'}), h('dd', {text: a.apiEndpoint || '—'}),
        h('dt', {text: 'MQTT broker'}), h('dd', {text: a.mqttBrokerUrl || '—'})));
  },
};
