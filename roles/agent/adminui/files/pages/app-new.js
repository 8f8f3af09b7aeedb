// A new app: the app form; the API's 400 shows by the field it names,
// and a deployed app opens on its page.
import {h, replace} from '../../lib/dom.js';
import {heading} from '../util.js';
import {appForm} from '../app-form.js';

export default {
  path: '/apps/new',
  title: 'New app',
  navGroup: 'Apps',
  render(ctx) {
    const {api} = ctx.app;
    const holder = h('div');
    replace(ctx.root, heading('New app'), holder);
    appForm(holder, {
      save: async (body) => {
        const made = await api.post('/apps', body);
        ctx.navigate(`/apps/${made.appId}`);
      },
    });
  },
};
