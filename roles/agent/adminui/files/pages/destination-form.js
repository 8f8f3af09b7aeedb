// A publish destination, new or edited: name, type, enabled and its
// config_json (each type's keys: roles/agent/publish/dest/README.md), and
// a connection test that saves nothing.
import {h, replace} from '../../lib/dom.js';
import {field, values, submitting, showErrors} from '../../lib/form.js';
import {heading, status} from '../util.js';

const types = [['mqtt', 'MQTT broker'], ['platform', 'edgeplat cloud (platform)'], ['tsdb', 'InfluxDB v2 (tsdb)'],
  ['iot-hub-a', 'AWS IoT Core (iot-hub-a)'], ['iot-hub-b', 'Azure IoT Hub (iot-hub-b)'], ['iot-hub-c', 'Alibaba IoT (iot-hub-c)']];

const examples = {
  mqtt: {url: 'tcp://192.168.10.20:1883'},
  platform: {},
  tsdb: {url: 'http://127.0.0.1:8086', org: 'plant', bucket: 'edge', token: ''},
};

export default {
  path: '/publishing/destinations/:id',
  title: 'Destination',
  navGroup: 'Publishing',
  async render(ctx) {
    const {api} = ctx.app;
    const isNew = ctx.params.id === 'new';
    let d = {type: 'mqtt', enabled: true, config_json: examples.mqtt};
    if (!isNew) {
      const {publishers = []} = await api.get('/publish/destinations?includeDisabled=true');
      d = publishers.find(p => String(p.id) === ctx.params.id);
      if (!d) throw new Error(`No destination ${ctx.params.id}.`);
    }
    if (ctx.stale()) return;
    const result = h('div', {id: 'test-result', 'aria-live': 'polite'});
    const form = h('form', {class: 'stack', id: 'destination-form', novalidate: true},
      field({name: 'name', label: 'Name', value: d.name ?? '', required: true}),
      field({name: 'type', label: 'Type', type: 'select', options: types, value: d.type}),
      field({name: 'enabled', label: 'Enabled', type: 'checkbox', value: d.enabled}),
      field({name: 'config_json', label: 'Configuration (JSON)', type: 'textarea', rows: 8,
        value: JSON.stringify(d.config_json || {}, null, 2),
        help: 'Secrets show as ******** and are kept when sent back unchanged.'}),
      h('div', {class: 'row-actions'},
        h('button', {type: 'submit', text: isNew ? 'Create destination' : 'Save changes'}),
        h('button', {type: 'button', class: 'secondary', id: 'test-destination', text: 'Test connection', onclick: () => test()}),
        h('a', {class: 'button secondary', href: '#/publishing', text: 'Cancel'})),
      result);
    const typeSel = form.querySelector('[data-input="type"]');
    const cfgBox = form.querySelector('[data-input="config_json"]');
    if (isNew) {
      typeSel.addEventListener('change', () => {
        cfgBox.value = JSON.stringify(examples[typeSel.value] || {}, null, 2);
      });
    }
    const body = () => {
      const v = values(form);
      try {
        v.config_json = v.config_json.trim() ? JSON.parse(v.config_json) : {};
      } catch (err) {
        showErrors(form, [{field: 'config_json', message: `not JSON: ${err.message}`}]);
        return null;
      }
      return v;
    };
    const test = async () => {
      const v = body();
      if (!v) return;
      replace(result);
      await submitting(form, async () => {
        const r = await api.post('/publish/destinations/test', {type: v.type, config_json: v.config_json});
        status(result, r.ok ? 'ok' : 'error', r.ok ? `Connection works: ${r.message}` : `Connection failed: ${r.error}`);
      });
    };
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const v = body();
      if (!v) return;
      const saved = await submitting(form, () => (isNew ? api.post('/publish/destinations', v) : api.patch(`/publish/destinations/${d.id}`, v)));
      if (saved) ctx.navigate('/publishing');
    });
    replace(ctx.root, heading(isNew ? 'New destination' : `Destination ${d.name}`), form);
  },
};
