// A subscription, new or edited: which endpoints' batches (MQTT topic
// filters) go to which destination, in which format.
import {h, replace} from '../../lib/dom.js';
import {field, values, submitting} from '../../lib/form.js';
import {heading, linesToList} from '../util.js';

const formats = [['custom', 'custom'], ['tags', 'tags'], ['ecp', 'ecp'], ['ml', 'ml']];
const compressions = [['json', 'json'], ['msgpack', 'msgpack'], ['json+deflate', 'json+deflate'], ['msgpack+deflate', 'msgpack+deflate']];

export default {
  path: '/publishing/subscriptions/:id',
  title: 'Subscription',
  navGroup: 'Publishing',
  async render(ctx) {
    const {api} = ctx.app;
    const isNew = ctx.params.id === 'new';
    const [{publishers = []}, {subscriptions = []}] = await Promise.all([
      api.get('/publish/destinations?includeDisabled=true'), api.get('/publish/subscriptions?includeDisabled=true')]);
    let s = {payload_format: 'custom', compression: 'json', enabled: true, topics: [], route_json: {}};
    if (!isNew) {
      s = subscriptions.find(x => String(x.id) === ctx.params.id);
      if (!s) throw new Error(`No subscription ${ctx.params.id}.`);
    }
    if (ctx.stale()) return;
    if (!publishers.length) {
      replace(ctx.root, heading('New subscription'), h('p', {},
        'A subscription needs a destination first: ', h('a', {href: '#/publishing/destinations/new', text: 'create one'}), '.'));
      return;
    }
    const form = h('form', {class: 'stack', id: 'subscription-form', novalidate: true},
      field({name: 'publish_destination_id', label: 'Destination', type: 'select',
        options: publishers.map(p => [String(p.id), `${p.name} (${p.type})`]), value: s.publish_destination_id}),
      field({name: 'topics', label: 'Endpoint topics (MQTT filters, one per line)', type: 'textarea', rows: 3,
        value: (s.topics || []).join('\n'), help: 'Matched against each endpoint\'s MQTT topic (its name when it has none); none matches every endpoint.'}),
      field({name: 'payload_format', label: 'Payload format', type: 'select', options: formats, value: s.payload_format}),
      field({name: 'compression', label: 'Compression', type: 'select', options: compressions, value: s.compression}),
      field({name: 'route_json.topic', label: 'Destination topic', value: (s.route_json && s.route_json.topic) || '',
        help: '{mqttTopic} is the endpoint\'s topic; not needed for the platform destination.'}),
      field({name: 'enabled', label: 'Enabled', type: 'checkbox', value: s.enabled}),
      h('div', {class: 'row-actions'},
        h('button', {type: 'submit', text: isNew ? 'Create subscription' : 'Save changes'}),
        h('a', {class: 'button secondary', href: '#/publishing', text: 'Cancel'})));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const v = values(form);
      const body = {...v, publish_destination_id: Number(v.publish_destination_id), topics: linesToList(v.topics),
        route_json: {...(s.route_json || {}), topic: v.route_json.topic}};
      if (!body.route_json.topic) delete body.route_json.topic;
      const saved = await submitting(form, () => (isNew ? api.post('/publish/subscriptions', body) : api.patch(`/publish/subscriptions/${s.id}`, body)));
      if (saved) ctx.navigate('/publishing');
    });
    replace(ctx.root, heading(isNew ? 'New subscription' : 'Subscription'), form);
  },
};
