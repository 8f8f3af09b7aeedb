// A new endpoint: the endpoint form, protocol first.
import {h, replace} from '../../lib/dom.js';
import {heading} from '../util.js';
import {endpointForm} from '../endpoint-form.js';

export default {
  path: '/endpoints/new',
  title: 'New endpoint',
  navGroup: 'Endpoints',
  render(ctx) {
    const {api} = ctx.app;
    const holder = h('div');
    replace(ctx.root, heading('New endpoint'), holder);
    const draw = (ep) => endpointForm(holder, ep, {
      isNew: true,
      onProtocol: (next) => { draw(next); holder.querySelector('[data-input="protocol"]').focus(); },
      save: async (body) => {
        await api.post('/endpoints', body);
        ctx.navigate(`/devices/${encodeURIComponent(body.protocol)}/${encodeURIComponent(body.name)}`);
      },
    });
    draw({protocol: ctx.query.get('protocol') || 'modbus'});
  },
};
