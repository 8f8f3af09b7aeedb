// The tenant's fleets and a form to create one (docs/fleets-and-jobs.md,
// "Fleets").
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {field, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {pageHead, parseJSON, isAdmin} from './admin-common.js';

// fleetFields are the inputs of the create and edit forms.
export function fleetFields(f = {}) {
  const tpl = f.template && Object.keys(f.template).length ? JSON.stringify(f.template, null, 2) : '';
  return [
    field({name: 'name', label: 'Name', value: f.name || '', required: true, help: 'Unique in the tenant; 1 to 128 bytes; not a UUID.'}),
    field({name: 'description', label: 'Description', type: 'textarea', rows: 2, value: f.description || ''}),
    field({name: 'template', label: 'Target-state template (JSON)', type: 'textarea', rows: 8, value: tpl,
      placeholder: '{"schemaVersion": 1, "settings": {"logging": {"level": "info"}}}',
      help: 'Merged under each member\'s own target state (docs/fleets-and-jobs.md, "Merge rules"). Empty for none.'}),
  ];
}

// fleetBody reads the form into the API's fleet body.
export function fleetBody(form) {
  return {
    name: form.elements.name.value.trim(),
    description: form.elements.description.value,
    template: parseJSON(form.elements.template.value, 'template'),
  };
}

export default {
  path: '/fleets',
  title: 'Fleets',
  nav: 'Fleets',
  async render(ctx) {
    const {root, app} = ctx;
    const list = h('div');
    const form = h('form', {class: 'stack', id: 'fleet-create', 'aria-label': 'Create a fleet'},
      fleetFields(), h('div', {}, h('button', {type: 'submit', text: 'Create fleet'})));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      submitting(form, async () => {
        const f = await app.api.post('/fleets', fleetBody(form));
        ctx.navigate(`/fleets/${encodeURIComponent(f.id)}`);
      });
    });
    replace(root, ...pageHead('Fleets', 'Groups of agents sharing a target-state template and a run state.'), list,
      isAdmin(app) ? h('details', {class: 'panel', open: ctx.query.has('new')}, h('summary', {text: 'Create a fleet'}), form) : null);
    try {
      const res = await app.api.get('/fleets');
      replace(list, table([
        {label: 'Name', value: f => h('a', {href: `#/fleets/${encodeURIComponent(f.id)}`, text: f.name})},
        {label: 'Run state', value: f => badge(f.runState)},
        {label: 'Members', value: f => String(f.memberCount)},
        {label: 'Template version', value: f => String(f.templateVersion)},
        {label: 'Description', value: f => f.description || '—'},
        {label: 'Updated', value: f => fmtTime(f.updatedAt)},
      ], res.fleets || [], {empty: 'No fleet yet.'}));
    } catch (err) {
      replace(list, errorBox(err));
    }
  },
};
