// Jobs: dispatch one to agents, a fleet or a tag query, the tenant's
// executions (refreshed on the event stream's job events), and the job
// templates (docs/fleets-and-jobs.md, "Jobs").
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {qs} from '../../lib/api.js';
import {field, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, isAdmin, ok, pageHead, parseJSON} from './admin-common.js';

// HANDLERS are the agents' job handlers (control.JobHandlers), with the
// params each needs, as docs/fleets-and-jobs.md "Handlers" lists them.
export const HANDLERS = [
  ['collect-diagnostics', ''],
  ['sync', ''],
  ['upload-logs', ''],
  ['reboot', ''],
  ['restart-endpoint', '{"endpoint": ""}'],
  ['restart-app', '{"appId": 0}'],
  ['write-register', '{"endpoint": "", "register": 0, "value": 0}'],
  ['shell', '{"command": ""}'],
];

// shortId shows the start of a UUID, enough to tell jobs apart.
export const shortId = (id) => String(id || '').slice(0, 8);

function parseArray(text, name) {
  if (!text.trim()) return [];
  try {
    const v = JSON.parse(text);
    if (Array.isArray(v)) return v;
  } catch { /* reported below */ }
  throw Object.assign(new Error(`${name}: must be a JSON array`), {fields: [{field: name, message: 'must be a JSON array'}]});
}

function optionalInt(form, name) {
  const v = form.elements[name].value;
  return v === '' ? undefined : Number(v);
}

// dispatchForm builds the dispatch form; onDone gets the created job.
function dispatchForm(app, {agents, fleets, templates}, onDone) {
  const handlerSel = field({name: 'handler', label: 'Handler', type: 'select', options: HANDLERS.map(([n]) => [n, n]), value: 'collect-diagnostics'});
  const paramsF = field({name: 'params', label: 'Params (JSON)', type: 'textarea', rows: 3, value: '',
    help: 'What the handler needs: restart-endpoint {endpoint}, restart-app {appId}, write-register {endpoint, register, value}, shell {command}.'});
  const templateSel = field({name: 'templateId', label: 'Template', type: 'select',
    options: templates.map(t => [t.id, `${t.name} (${t.handler})`])});
  const parametersF = field({name: 'parameters', label: 'Parameters (JSON)', type: 'textarea', rows: 3,
    help: 'Values for the template\'s declared parameters, e.g. {"line": 3}.'});
  const source = h('fieldset', {class: 'choice'}, h('legend', {text: 'Run'}),
    h('label', {}, h('input', {type: 'radio', name: 'source', value: 'handler', checked: true}), ' a handler'),
    h('label', {}, h('input', {type: 'radio', name: 'source', value: 'template', disabled: !templates.length}), ' a template'));
  const agentBoxes = h('div', {class: 'checks', 'data-field': 'targets.agents'}, agents.length ? agents.map(a =>
    h('label', {}, h('input', {type: 'checkbox', name: 'agent', value: a.uuid}), ' ', a.name || a.uuid, ' ', badge(a.status || 'unknown')))
    : h('p', {class: 'empty', text: 'No agent.'}));
  const fleetSel = field({name: 'targets.fleet', label: 'Fleet', type: 'select', options: fleets.map(f => [f.id, `${f.name} (${f.memberCount} members)`])});
  const tagF = field({name: 'targets.tagQuery', label: 'Tag query (JSON)', type: 'textarea', rows: 2, placeholder: '{"site": "north"}',
    help: 'As POST /agents/query takes it: {"line": ["1", "3"], "owner": "*"}.'});
  const targetKind = h('fieldset', {class: 'choice'}, h('legend', {text: 'Targets'}),
    h('label', {}, h('input', {type: 'radio', name: 'target', value: 'agents', checked: true}), ' agents'),
    h('label', {}, h('input', {type: 'radio', name: 'target', value: 'fleet', disabled: !fleets.length}), ' a fleet'),
    h('label', {}, h('input', {type: 'radio', name: 'target', value: 'tagQuery'}), ' a tag query'));
  const options = h('details', {}, h('summary', {text: 'Rollout, abort and timeout'}),
    h('div', {class: 'grid-3'},
      field({name: 'rollout.agentsPerMinute', label: 'Agents per minute', type: 'number', min: 0, value: 0, help: '0 releases every execution at once.'}),
      field({name: 'abort.failedPercent', label: 'Abort above failed %', type: 'number', min: 0, max: 100, value: 0, help: '0 never aborts.'}),
      field({name: 'abort.minExecuted', label: 'Abort after at least', type: 'number', min: 1, value: 1, help: 'finished executions.'}),
      field({name: 'timeoutSeconds', label: 'Timeout (s)', type: 'number', min: 0, max: 86400,
        help: 'Per agent; empty takes the template\'s, 0 the agent\'s own maximum.'})));
  const form = h('form', {class: 'stack', id: 'job-dispatch', 'aria-label': 'Dispatch a job'},
    source, handlerSel, paramsF, templateSel, parametersF, targetKind, agentBoxes, fleetSel, tagF, options,
    h('div', {}, h('button', {type: 'submit', id: 'job-dispatch-submit', text: 'Dispatch'})));
  const pick = (name) => form.querySelector(`input[name=${name}]:checked`).value;
  const sync = () => {
    const tpl = pick('source') === 'template';
    handlerSel.hidden = paramsF.hidden = tpl;
    templateSel.hidden = parametersF.hidden = !tpl;
    const t = pick('target');
    agentBoxes.hidden = t !== 'agents';
    fleetSel.hidden = t !== 'fleet';
    tagF.hidden = t !== 'tagQuery';
    // Hidden inputs stay out of values and out of validation.
    for (const el of form.querySelectorAll('[data-input]')) el.disabled = !!el.closest('[hidden]');
  };
  form.addEventListener('change', (e) => {
    if (e.target.name === 'source' || e.target.name === 'target') sync();
    if (e.target.name === 'handler') {
      const hint = HANDLERS.find(([n]) => n === e.target.value);
      if (hint && !form.elements.params.value.trim()) form.elements.params.value = hint[1];
    }
  });
  sync();
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(form, async () => {
      const body = {};
      if (pick('source') === 'template') {
        body.templateId = form.elements.templateId.value;
        const p = parseJSON(form.elements.parameters.value, 'parameters');
        if (Object.keys(p).length) body.parameters = p;
      } else {
        body.handler = form.elements.handler.value;
        const p = parseJSON(form.elements.params.value, 'params');
        if (Object.keys(p).length) body.params = p;
      }
      const t = pick('target');
      if (t === 'agents') body.targets = {agents: [...form.querySelectorAll('input[name=agent]:checked')].map(x => x.value)};
      else if (t === 'fleet') body.targets = {fleet: form.elements['targets.fleet'].value};
      else body.targets = {tagQuery: parseJSON(form.elements['targets.tagQuery'].value, 'targets.tagQuery')};
      body.rollout = {agentsPerMinute: optionalInt(form, 'rollout.agentsPerMinute') || 0};
      const fp = optionalInt(form, 'abort.failedPercent');
      if (fp) body.abort = {failedPercent: fp, minExecuted: optionalInt(form, 'abort.minExecuted') || 1};
      const to = optionalInt(form, 'timeoutSeconds');
      if (to !== undefined) body.timeoutSeconds = to;
      onDone(await app.api.post('/jobs/execute', body));
    });
  });
  return form;
}

// templateForm creates (t undefined) or replaces a job template.
function templateForm(app, t, onDone) {
  const form = h('form', {class: 'stack template-form', 'aria-label': t ? `Edit template ${t.name}` : 'Create a template'},
    field({name: 'name', label: 'Name', value: t ? t.name : '', required: true}),
    field({name: 'description', label: 'Description', value: t ? t.description : ''}),
    field({name: 'handler', label: 'Handler', type: 'select', options: HANDLERS.map(([n]) => [n, n]), value: t ? t.handler : 'collect-diagnostics'}),
    field({name: 'params', label: 'Params (JSON)', type: 'textarea', rows: 3, value: t && t.params ? JSON.stringify(t.params) : '',
      help: 'A "{{name}}" string takes the value of the declared parameter name.'}),
    field({name: 'parameters', label: 'Declared parameters (JSON array)', type: 'textarea', rows: 3,
      value: t && t.parameters && t.parameters.length ? JSON.stringify(t.parameters) : '', placeholder: '[{"name": "line", "required": true}]'}),
    field({name: 'timeoutSeconds', label: 'Default timeout (s)', type: 'number', min: 0, max: 86400, value: t ? t.timeoutSeconds : 0}),
    h('div', {}, h('button', {type: 'submit', text: t ? 'Save template' : 'Create template'})));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    submitting(form, async () => {
      const body = {name: form.elements.name.value.trim(), description: form.elements.description.value,
        handler: form.elements.handler.value, params: parseJSON(form.elements.params.value, 'params'),
        parameters: parseArray(form.elements.parameters.value, 'parameters'), timeoutSeconds: optionalInt(form, 'timeoutSeconds') || 0};
      await (t ? app.api.put(`/jobs/templates/${encodeURIComponent(t.id)}`, body) : app.api.post('/jobs/templates', body));
      onDone();
    });
  });
  return form;
}

export default {
  path: '/jobs',
  title: 'Jobs',
  nav: 'Jobs',
  async render(ctx) {
    const {root, app} = ctx;
    const admin = isAdmin(app);
    const msg = h('div', {'aria-live': 'polite'});
    const dispatchBox = h('div');
    const execBox = h('div', {id: 'executions'});
    const tplBox = h('div', {id: 'templates'});
    const live = h('span', {class: 'live', text: 'live'});
    const statusSel = h('select', {id: 'exec-status'},
      ['', 'queued', 'in_progress', 'succeeded', 'failed', 'timed_out', 'cancelled'].map(s => h('option', {value: s, text: s || 'any status'})));
    const more = h('div');
    replace(root, ...pageHead('Jobs', 'One-off work run once on each target agent; each agent\'s run is an execution.'), msg,
      admin ? h('details', {class: 'panel', open: true, id: 'dispatch-panel'}, h('summary', {text: 'Dispatch a job'}), dispatchBox) : null,
      h('h2', {}, 'Executions ', live),
      h('div', {class: 'toolbar'}, h('div', {class: 'field'}, h('label', {for: 'exec-status', text: 'Status'}), statusSel)),
      execBox, more, h('h2', {text: 'Templates'}), tplBox);

    let names = new Map();
    let rows = [];
    const execTable = () => replace(execBox, table([
      {label: 'Job', value: x => h('a', {href: `#/jobs/${encodeURIComponent(x.jobId)}`, class: 'mono', 'data-job': x.jobId, text: shortId(x.jobId)})},
      {label: 'Agent', value: x => h('a', {href: `#/agents/${encodeURIComponent(x.agentUuid)}`, text: names.get(x.agentUuid) || x.agentUuid})},
      {label: 'Handler', value: x => x.handler},
      {label: 'Status', value: x => badge(x.status)},
      {label: 'Reason', value: x => x.statusReason || '—'},
      {label: 'Queued', value: x => fmtTime(x.queuedAt)},
      {label: 'Finished', value: x => fmtTime(x.finishedAt)},
    ], rows, {empty: 'No execution yet.'}));
    const loadExecs = async (cursor) => {
      const res = await app.api.get('/jobs/executions' + qs({status: statusSel.value, limit: 50, cursor}));
      rows = cursor ? rows.concat(res.executions || []) : (res.executions || []);
      execTable();
      replace(more, res.nextCursor ? h('button', {type: 'button', class: 'secondary', text: 'Older executions',
        onclick: () => loadExecs(res.nextCursor).catch(err => replace(more, errorBox(err)))}) : null);
    };
    statusSel.addEventListener('change', () => loadExecs().catch(err => replace(execBox, errorBox(err))));

    const loadTemplates = async () => {
      const res = await app.api.get('/jobs/templates');
      const ts = res.templates || [];
      replace(tplBox, table([
        {label: 'Name', value: t => t.name},
        {label: 'Handler', value: t => t.handler},
        {label: 'Parameters', value: t => (t.parameters || []).map(p => p.name + (p.required ? '*' : '')).join(', ') || '—'},
        {label: 'Timeout', value: t => t.timeoutSeconds ? `${t.timeoutSeconds} s` : '—'},
        ...(admin ? [{label: 'Actions', value: t => h('div', {class: 'actions'},
          h('details', {}, h('summary', {text: 'Edit'}), templateForm(app, t, async () => {
            replace(msg, ok(`Template ${t.name} saved.`));
            await reloadAll();
          })),
          confirmButton({label: 'Delete', question: `Delete template ${t.name}? Jobs made from it stay.`, onConfirm: async () => {
            await app.api.del(`/jobs/templates/${encodeURIComponent(t.id)}`);
            replace(msg, ok(`Template ${t.name} deleted.`));
            await reloadAll();
          }}))}] : []),
      ], ts, {empty: 'No template yet.'}),
      admin ? h('details', {class: 'panel'}, h('summary', {text: 'Create a template'}), templateForm(app, undefined, async () => {
        replace(msg, ok('Template created.'));
        await reloadAll();
      })) : null);
      return ts;
    };

    const reloadAll = async () => {
      const [a, f, templates] = await Promise.all([app.api.get('/agents'), app.api.get('/fleets'), loadTemplates()]);
      const agents = a.agents || [];
      names = new Map(agents.map(x => [x.uuid, x.name || x.uuid]));
      if (admin && !ctx.stale()) {
        replace(dispatchBox, dispatchForm(app, {agents, fleets: f.fleets || [], templates},
          (job) => ctx.navigate(`/jobs/${encodeURIComponent(job.jobId)}`)));
      }
      await loadExecs();
    };
    try {
      await reloadAll();
    } catch (err) {
      replace(msg, errorBox(err));
      return undefined;
    }
    // A job event changes some execution: reload the first page, at most
    // once a second however many events arrive.
    let pending = null;
    const stop = app.stream('/agents/events', (event) => {
      if (event !== 'job' || pending) return;
      pending = setTimeout(() => {
        pending = null;
        loadExecs().catch(err => replace(execBox, errorBox(err)));
      }, 1000);
    }, (state) => { live.dataset.state = state; });
    return () => {
      clearTimeout(pending);
      stop();
    };
  },
};
