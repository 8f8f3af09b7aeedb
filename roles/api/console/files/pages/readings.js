// The readings explorer: one metric of one agent over a range (the
// readings API's time series), and a box for the query language
// (docs/query-language.md) whose errors show next to the box, at the
// line and column the API names.
import {h, replace, table, badge, fmtTime, fmtNum} from '../../lib/dom.js';
import {qs} from '../../lib/api.js';
import {timeChart} from '../../lib/chart.js';
import {field, submitting} from '../../lib/form.js';
import {errorBox} from '../../lib/router.js';
import {loadSeries, align, num, parseDuration, ranges} from './readings-data.js';

const resolutions = [['', 'Automatic'], ['raw', 'Raw readings'], ['1m', 'Per minute'], ['1h', 'Per hour'], ['1d', 'Per day']];

export default {
  path: '/readings',
  title: 'Readings',
  nav: 'Readings',
  async render(ctx) {
    const {root, app, query} = ctx;
    const agentsRes = await app.api.get('/agents');
    const agents = agentsRes.agents || [];
    const agent0 = agents.find(a => a.uuid === query.get('agent')) || agents[0];
    const pick = h('form', {class: 'toolbar', id: 'explore-form', 'aria-label': 'Metric to explore'},
      field({name: 'agent', label: 'Agent', type: 'select', value: agent0 ? agent0.uuid : '',
        options: agents.map(a => [a.uuid, a.name || a.uuid])}),
      field({name: 'metric', label: 'Metric', type: 'select', options: []}),
      field({name: 'range', label: 'Range', type: 'select', value: '1h', options: ranges}),
      field({name: 'step', label: 'Resolution', type: 'select', value: '', options: resolutions}),
      h('button', {type: 'submit', text: 'Show'}));
    const chartBox = h('div', {id: 'explore-chart'});
    const tableBox = h('div');

    const qform = h('form', {class: 'stack wide', id: 'query-form', 'aria-label': 'Query'},
      field({name: 'query', label: 'Query', type: 'textarea', rows: 3,
        help: 'The readings query language, e.g. avg_over_time(readings{metric_name="press-1.r3"}[1m]) (docs/query-language.md).'}),
      h('div', {class: 'toolbar'},
        field({name: 'range', label: 'Range', type: 'select', value: '1h', options: ranges}),
        field({name: 'step', label: 'Step', value: '1m', help: '30s, 1m, 1h…'}),
        h('button', {type: 'submit', id: 'query-run', text: 'Run'})));
    const qerr = h('div', {id: 'query-error', class: 'query-error', role: 'alert', hidden: true});
    qform.elements.query.after(qerr);
    const qout = h('div', {id: 'query-result'});

    replace(root, h('h1', {id: 'page-title', text: 'Readings'}),
      agents.length ? null : h('p', {class: 'empty', text: 'No agent yet: there is nothing to explore.'}),
      h('section', {class: 'panel', 'aria-labelledby': 'explore-h'}, h('h2', {id: 'explore-h', text: 'Explore a metric'}), pick, chartBox, tableBox),
      h('section', {class: 'panel', 'aria-labelledby': 'query-h'}, h('h2', {id: 'query-h', text: 'Query'}), qform, qout));

    let chart = null;
    const charts = [];
    ctx.onCleanup(() => charts.forEach(c => c && c.destroy()));

    const loadMetrics = async () => {
      const a = pick.elements.agent.value;
      if (!a) return;
      const cat = await app.api.get(`/readings/catalog${qs({agent_uuid: a})}`);
      const names = (cat.metrics || []).map(m => m.metricName);
      const sel = pick.elements.metric;
      const want = query.get('metric');
      replace(sel, names.map(n => h('option', {value: n, selected: n === want, text: n})));
      if (!names.length) sel.append(h('option', {value: '', text: 'No metric yet'}));
      if (!qform.elements.query.value && names.length) {
        qform.elements.query.value = `readings{agent_uuid="${a}", metric_name="${sel.value}"}`;
      }
    };

    const explore = () => submitting(pick, async () => {
      const a = pick.elements.agent.value;
      const m = pick.elements.metric.value;
      if (chart) chart.destroy();
      chart = null;
      if (!a || !m) {
        replace(chartBox, h('p', {class: 'empty', text: 'Pick an agent and a metric.'}));
        replace(tableBox);
        return;
      }
      const secs = parseDuration(pick.elements.range.value);
      const stepSel = pick.elements.step.value;
      const s = await loadSeries(app.api, a, m, secs, {step: stepSel === '' ? undefined : stepSel === 'raw' ? '' : stepSel});
      if (ctx.stale()) return;
      const el = h('div');
      replace(chartBox, el);
      chart = timeChart(el, {series: [{label: m}], title: `${m} (${s.interval ? 'average per ' + s.interval : 'raw'})`});
      charts.push(chart);
      chart.set(s.x, [s.y]);
      const last = s.points.slice(-20).reverse();
      replace(tableBox, table(s.interval ? [
        {label: 'Bucket', value: p => fmtTime(p.time)},
        {label: 'Min', value: p => fmtNum(num(p.min))}, {label: 'Average', value: p => fmtNum(num(p.avg))},
        {label: 'Max', value: p => fmtNum(num(p.max))}, {label: 'Count', value: p => String(p.count)},
      ] : [
        {label: 'Time', value: p => fmtTime(p.time)},
        {label: 'Value', value: p => fmtNum(num(p.value))},
        {label: 'Quality', value: p => badge(p.quality || '—')},
      ], last, {empty: 'No readings in this range.', caption: `The last ${last.length} of ${s.points.length} points`}));
    });

    pick.elements.agent.addEventListener('change', () => loadMetrics().then(explore).catch(err => replace(chartBox, errorBox(err))));
    pick.addEventListener('submit', (e) => { e.preventDefault(); explore(); });

    qform.addEventListener('submit', (e) => {
      e.preventDefault();
      runQuery();
    });
    qform.elements.query.addEventListener('keydown', (e) => {
      // Enter runs, as in any search box; Shift+Enter starts a new line.
      if (e.key === 'Enter' && !e.shiftKey) {
        e.preventDefault();
        runQuery();
      }
    });
    const runQuery = async () => {
      const text = qform.elements.query.value;
      qerr.hidden = true;
      replace(qerr);
      qform.elements.query.removeAttribute('aria-invalid');
      const body = {query: text, start: Date.now() - parseDuration(qform.elements.range.value) * 1000, end: Date.now(),
        step: qform.elements.step.value.trim() || '1m'};
      let res;
      try {
        qform.querySelector('#query-run').disabled = true;
        res = await app.api.post('/readings/query', body);
      } catch (err) {
        showQueryError(text, err);
        return;
      } finally {
        qform.querySelector('#query-run').disabled = false;
      }
      if (ctx.stale()) return;
      const list = res.series || [];
      const name = (s) => Object.entries(s.labels || {}).filter(([k]) => k !== 'agent_uuid' || list.length > 1)
        .map(([k, v]) => `${k}=${v}`).join(', ') || 'value';
      const el = h('div', {id: 'query-chart'});
      const {x, ys} = align(list.map(s => ({x: s.points.map(p => Date.parse(p.t) / 1000), y: s.points.map(p => num(p.v))})));
      replace(qout,
        h('p', {class: 'muted', text: `${res.resultType} result: ${list.length} series, ${x.length} times.`}),
        list.length ? el : null,
        table([
          {label: 'Series', value: s => h('span', {class: 'mono', text: name(s)})},
          {label: 'Points', value: s => String(s.points.length)},
          {label: 'Last value', value: s => (s.points.length ? fmtNum(num(s.points[s.points.length - 1].v)) : '—')},
        ], list, {empty: 'The query matched nothing in this range.', caption: 'Series'}));
      if (list.length) {
        const c = timeChart(el, {series: list.slice(0, 12).map(s => ({label: name(s), unit: (s.labels || {}).unit})), title: 'Query result'});
        charts.push(c);
        c.set(x, ys.slice(0, 12));
      }
    };

    // showQueryError puts the API's message under the box; a syntax
    // error's line and column also mark the spot in the query.
    const showQueryError = (text, err) => {
      const m = /line (\d+), column (\d+)/.exec(err.message || '');
      const parts = [h('strong', {text: err.code === 'invalid_query' ? 'Syntax error: ' : 'The query failed: '}), err.message];
      if (m) {
        const line = text.split('\n')[Number(m[1]) - 1] ?? '';
        const col = Number(m[2]);
        parts.push(h('pre', {class: 'caret', 'aria-hidden': 'true', text: `${line}\n${' '.repeat(Math.max(col - 1, 0))}^`}));
        qerr.dataset.line = m[1];
        qerr.dataset.column = m[2];
      }
      replace(qerr, parts);
      qerr.hidden = false;
      qform.elements.query.setAttribute('aria-invalid', 'true');
      qform.elements.query.setAttribute('aria-describedby', 'query-error');
      qform.elements.query.focus();
    };

    if (agents.length) {
      await loadMetrics();
      await explore();
    }
  },
};
