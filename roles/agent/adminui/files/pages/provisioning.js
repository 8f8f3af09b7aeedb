// Provisioning: the link to the cloud. Provision with a provisioning
// key, see the status, pull the target state now, deprovision.
import {h, replace, badge} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {heading, confirmButton, run, status} from '../util.js';

export default {
  path: '/provisioning',
  title: 'Provisioning',
  nav: 'Provisioning',
  async render(ctx) {
    const {api} = ctx.app;
    const msg = h('div', {id: 'provisioning-status', 'aria-live': 'polite'});
    const body = h('div');
    replace(ctx.root, heading('Provisioning'), msg, body);
    const load = async () => {
      const st = await api.get('/provision/status');
      if (ctx.stale()) return;
      const props = h('dl', {class: 'props', id: 'provision-props'},
        h('dt', {text: 'State'}), h('dd', {}, badge(st.provisioned ? 'provisioned' : 'standalone', st.provisioned ? 'ok' : 'queued')),
        h('dt', {text: 'Device UUID'}), h('dd', {class: 'mono', text: st.uuid || '—'}),
        h('dt', {text: 'Device name'}), h('dd', {text: st.deviceName || '—'}),
        h('dt', {text: 'Cloud API'}), h('dd', {text: st.apiEndpoint || '—'}),
        h('dt', {text: 'MQTT broker'}), h('dd', {text: st.mqttBrokerUrl || (st.mqttConfigured ? 'configured' : '—')}),
        h('dt', {text: 'Target state version'}), h('dd', {text: String(st.targetVersion ?? 0)}),
        h('dt', {text: 'Provisioning key stored'}), h('dd', {text: st.hasProvisioningKey ? 'yes' : 'no'}));
      if (st.provisioned) {
        replace(body, h('section', {class: 'panel'}, h('h2', {text: 'Status'}), props),
          h('div', {class: 'row-actions'},
            h('button', {type: 'button', class: 'secondary', id: 'sync-pull', text: 'Pull the target state now', onclick: () => run(msg, async () => {
              const r = await api.post('/sync/pull');
              status(msg, r.error ? 'error' : 'ok', r.error || `Target state version ${r.version}${r.changed ? ' (changed)' : ' (unchanged)'}.`);
            })}),
            confirmButton('Deprovision', () => run(msg, async () => {
              const r = await api.post('/deprovision');
              status(msg, 'ok', r.message || 'Deprovisioned.');
              await load();
            }))));
        return;
      }
      const form = h('form', {class: 'stack', id: 'provision-form', novalidate: true},
        field({name: 'apiEndpoint', label: 'Cloud API URL', type: 'url', value: st.apiEndpoint || '', placeholder: 'https://cloud.example.com', required: true}),
        field({name: 'provisioningApiKey', label: 'Provisioning key', type: 'password', autocomplete: 'off',
          help: st.hasProvisioningKey ? 'Leave empty to provision again with the stored device key.' : 'From the cloud console.'}),
        field({name: 'deviceName', label: 'Device name', value: st.deviceName || ''}),
        field({name: 'deviceType', label: 'Device type', placeholder: 'gateway'}),
        field({name: 'applicationId', label: 'Application id'}),
        h('button', {type: 'submit', id: 'provision', text: 'Provision'}));
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        const v = values(form);
        for (const k of Object.keys(v)) if (v[k] === '') delete v[k];
        const r = await submitting(form, async () => {
          try {
            return await api.post('/provision', v);
          } catch (err) {
            // A failed phase says which and what to do next.
            const b = err.body || {};
            if (b.phase) err.fields = [{field: '', message: `${err.message} (phase ${b.phase}${b.hint ? '; ' + b.hint : ''})`}];
            throw err;
          }
        });
        if (r) {
          status(msg, 'ok', `Provisioned as ${r.device ? r.device.deviceName : 'this device'}.`);
          await load();
        }
      });
      replace(body, h('section', {class: 'panel'}, h('h2', {text: 'Status'}), props),
        h('section', {class: 'panel'}, h('h2', {text: 'Provision with the cloud'}), form));
    };
    await load();
  },
};
