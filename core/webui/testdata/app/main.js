// The library's self-test: each check runs in the browser and the Go
// test reads window.results.
import {fieldErrors, Client, qs} from '../lib/api.js';
import {compile} from '../lib/router.js';
import {field, values, showErrors} from '../lib/form.js';
import {h} from '../lib/dom.js';
import {timeChart} from '../lib/chart.js';

const results = {};
const check = (name, fn) => {
  try {
    results[name] = fn();
  } catch (err) {
    results[name] = 'threw: ' + err.message;
  }
};

check('fieldErrors', () => fieldErrors('data_points[0].address: must be 0..65535; connection.host: is required; something else'));
check('cloudDetails', () => fieldErrors('invalid', {error: {code: 'invalid', message: 'invalid', details: [{field: 'layout.widgets[1].w', message: 'must be 1..12'}]}}));
check('route', () => [compile('/devices/:protocol/:name')('/devices/modbus/plc%2001'), compile('/devices/:protocol/:name')('/devices/modbus')]);
check('qs', () => qs({a: 1, b: '', c: 'x y'}));
check('form', () => {
  const form = h('form', {}, field({name: 'name', label: 'Name', value: 'ep1'}),
    field({name: 'connection.port', label: 'Port', type: 'number', value: 502}),
    field({name: 'data_points[0].address', label: 'Address', type: 'number', value: 7}),
    field({name: 'enabled', label: 'Enabled', type: 'checkbox', value: true}));
  document.getElementById('app').append(form);
  const v = values(form);
  showErrors(form, [{field: 'data_points[0].address', message: 'must be 0..65535'}, {field: 'nope', message: 'odd'}]);
  const shown = form.querySelector('[data-field="data_points[0].address"] .field-error').textContent;
  return {values: v, shown, focused: document.activeElement.dataset.input, alert: form.querySelector('.form-error').textContent};
});
check('xss', () => h('p', {text: '<img src=x onerror=alert(1)>'}).innerHTML);
const el = h('div');
document.getElementById('app').append(el);
const c = timeChart(el, {series: [{label: 'temp', unit: 'C'}], windowSec: 60});
c.push(100, [1.5]);
c.push(150, [2.5]);
c.push(200, [3.5]);
results.chart = {points: el.getAttribute('data-points'), data: el.chartData};
new Client({base: '/nope'}).get('/x').catch(err => {
  results.client = {status: err.status, message: err.message};
  window.results = results;
});
