// A new endpoint: the endpoint form, protocol first. The discovery
// page's "Add as endpoint" opens it prefilled: ?protocol=&name= and
// connection= (a JSON object), so the operator adds data points and saves
// through the same validation.
import {h, replace} from '../../lib/dom.js';
import {heading} from '../util.js';
import {endpointForm} from '../endpoint-form.js';

// connectionOf reads the connection= query: a JSON object, else none.
function connectionOf(q) {
  if (!q) return undefined;
  try {
    const c = JSON.parse(q);
    return c && typeof c === 'object' && !Array.isArray(c) ? c : undefined;
  } catch {
    return undefined;
  }
}

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
    draw({protocol: ctx.query.get('protocol') || 'modbus', name: ctx.query.get('name') ?? undefined,
      connection: connectionOf(ctx.query.get('connection'))});
  },
};
