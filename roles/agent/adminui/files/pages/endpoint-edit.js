// Editing an endpoint: the endpoint form filled from GET /v1/endpoints.
// An endpoint the cloud manages answers 409, shown at the top of the form.
import {h, replace} from '../../lib/dom.js';
import {heading} from '../util.js';
import {endpointForm} from '../endpoint-form.js';

export default {
  path: '/endpoints/edit/:name',
  title: 'Edit endpoint',
  navGroup: 'Endpoints',
  async render(ctx) {
    const {api} = ctx.app;
    const {endpoints = []} = await api.get('/endpoints');
    const ep = endpoints.find(e => e.name === ctx.params.name);
    if (!ep) throw new Error(`No endpoint named ${ctx.params.name}.`);
    if (ctx.stale()) return;
    const holder = h('div');
    replace(ctx.root, heading(`Edit ${ep.name}`), h('p', {class: 'muted', text: `${ep.protocol} · ${ep.uuid}`}), holder);
    endpointForm(holder, ep, {
      isNew: false,
      save: async (body) => {
        await api.patch(`/endpoints/${encodeURIComponent(ep.uuid)}`, body);
        ctx.navigate('/endpoints');
      },
    });
  },
};
