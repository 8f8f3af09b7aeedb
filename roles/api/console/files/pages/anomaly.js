// Anomalies: the tenant's incidents (the open ones by default; resolve one
// by hand) and its detection rules (create from a JSON rule, delete), over
// the routes of docs/anomaly-cloud.md. Incidents follow the tenant
// stream's "anomaly" events, which alert rules with a live target send.
import {h, replace, table, badge, fmtTime} from '../../lib/dom.js';
import {qs} from '../../lib/api.js';
import {field, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {confirmButton, ok, pageHead, parseJSON} from './admin-common.js';

const EXAMPLE = '{"name": "temperature spikes", "type": "zscore", "metric": "temp*", "k": 3, "window": "10m"}';

const fmtNumber = (n) => (typeof n === 'number' ? String(Math.round(n * 1000) / 1000) : '—');

// describe is a rule's condition in one line.
function describe(r) {
  switch (r.type) {
    case 'threshold': return `${r.metric} ${r.op} ${r.threshold}`;
    case 'zscore': return `${r.metric}: |z| ≥ ${r.k} over ${r.window}`;
    case 'rate_of_change': return `${r.metric} ${r.op} ≥ ${r.rate}/${r.per} over ${r.window}`;
    case 'correlation': return `${(r.conditions || []).map(c => c.metric).join(' & ')} within ${r.window}`;
  }
  return r.type;
}

function scope(r) {
  if (r.scope?.agentUuid) return `agent ${r.scope.agentUuid.slice(0, 8)}`;
  if (r.scope?.fleetId) return `fleet ${r.scope.fleetId.slice(0, 8)}`;
  return 'every agent';
}

export default {
  path: '/anomalies',
  title: 'Anomalies',
  nav: 'Anomalies',
  async render(ctx) {
    const {root, app} = ctx;
    const msg = h('div', {'aria-live': 'polite'});
    const status = field({name: 'status', label: 'Incidents', type: 'select', value: ctx.query.status ?? 'open',
      options: [['open', 'open'], ['closed', 'closed'], ['', 'all']]});
    const incidents = h('div', {id: 'anomaly-incidents'});
    const rules = h('div', {id: 'anomaly-rules'});
    const form = h('form', {class: 'stack', id: 'anomaly-rule-create', 'aria-label': 'Create a rule'},
      field({name: 'rule', label: 'Rule (JSON)', type: 'textarea', rows: 4, value: EXAMPLE,
        help: 'threshold (op, threshold), zscore (k, window), rate_of_change (op, rate, per, window); scope {fleetId} or {agentUuid}.'}),
      h('div', {}, h('button', {type: 'submit', id: 'anomaly-rule-submit', text: 'Create rule'})));
    replace(root, ...pageHead('Anomalies', 'Incidents the cloud rules opened, and the rules. An incident closes once its series stays clear for the rule\'s recoverAfter, or by hand.'),
      msg, h('div', {class: 'toolbar'}, status), incidents,
      h('h2', {text: 'Rules'}), rules, h('div', {class: 'panel'}, h('h2', {text: 'New rule'}), form));

    const loadIncidents = async () => {
      const st = status.querySelector('select').value;
      const res = await app.api.get('/anomaly/incidents' + qs({status: st, limit: 200}));
      replace(incidents, table([
        {label: 'Opened', value: i => fmtTime(i.openedAt)},
        {label: 'Rule', value: i => i.ruleName},
        {label: 'Severity', value: i => badge(i.severity, i.severity === 'critical' ? 'offline' : i.severity === 'warning' ? 'degraded' : 'ok')},
        {label: 'Agent', value: i => h('a', {href: `#/agents/${encodeURIComponent(i.sensor.agentUuid)}`, text: i.sensor.agentUuid.slice(0, 8)})},
        {label: 'Metric', value: i => h('code', {class: 'mono', text: i.sensor.metric})},
        {label: 'Value', value: i => fmtNumber(i.value)},
        {label: 'Score', value: i => `${fmtNumber(i.score)} (peak ${fmtNumber(i.peakScore)})`},
        {label: 'Duration', value: i => `${Math.round(i.durationSeconds)} s`},
        {label: 'State', value: i => i.status === 'open'
          ? confirmButton({label: 'Resolve', question: 'Close this incident?', danger: false, onConfirm: async () => {
            await app.api.patch(`/anomaly-incidents/${encodeURIComponent(i.id)}/resolve`, {});
            replace(msg, ok('Incident resolved.'));
            await loadIncidents();
          }})
          : badge(i.closeReason || 'closed', 'offline')},
      ], res.incidents || [], {empty: st === 'open' ? 'No open incident.' : 'No incident.'}));
    };

    const loadRules = async () => {
      const res = await app.api.get('/anomaly/rules');
      replace(rules, table([
        {label: 'Name', value: r => r.name},
        {label: 'Type', value: r => r.type},
        {label: 'Condition', value: r => h('code', {class: 'mono', text: describe(r)})},
        {label: 'Scope', value: r => scope(r)},
        {label: 'Severity', value: r => r.severity},
        {label: 'Enabled', value: r => (r.enabled ? badge('on', 'ok') : badge('off', 'offline'))},
        {label: 'Actions', value: r => confirmButton({label: 'Delete', question: `Delete ${r.name}? Its incidents stay.`,
          onConfirm: async () => {
            await app.api.del(`/anomaly/rules/${encodeURIComponent(r.id)}`);
            replace(msg, ok(`${r.name} deleted.`));
            await loadRules();
          }})},
      ], res.rules || [], {empty: 'No rule yet.'}));
    };

    status.querySelector('select').addEventListener('change', () => {
      loadIncidents().catch(err => replace(incidents, errorBox(err)));
    });
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      submitting(form, async () => {
        const rule = parseJSON(form.elements.rule.value, 'rule');
        const created = await app.api.post('/anomaly/rules', rule);
        replace(msg, ok(`Rule ${created.name} created.`));
        await loadRules();
      });
    });

    try {
      await Promise.all([loadIncidents(), loadRules()]);
    } catch (err) {
      replace(incidents, errorBox(err));
      return undefined;
    }
    // Live notifications (alert rules with a live target) say an
    // incident moved: read the list again, at most once a second however
    // many arrive.
    let pending = null;
    const stop = app.stream('/agents/events', (event) => {
      if (event !== 'anomaly' || pending) return;
      pending = setTimeout(() => {
        pending = null;
        loadIncidents().catch(err => replace(incidents, errorBox(err)));
      }, 1000);
    });
    return () => {
      clearTimeout(pending);
      stop();
    };
  },
};
