// Time-series charts on the vendored uPlot (docs/web-consoles.md lists
// the vendored libraries). The drawn data stays readable on the chart's
// element: el.chartData is {x: [unix seconds], series: [[values]]} and
// the data-points attribute its point count, which is what tests and
// assistive tools read instead of pixels.

import uPlot from './vendor/uplot/uPlot.esm.js';
import {h} from './dom.js';

const palette = ['#1f6feb', '#d9480f', '#2b8a3e', '#ae3ec9', '#e67700', '#0b7285'];

// timeChart draws series [{label, unit}] in el. It returns
// {set(x, ys), push(t, values), destroy()}; x in unix seconds. With
// windowSec, push keeps only the last windowSec seconds.
export function timeChart(el, {series, height = 260, windowSec = 0, title = ''}) {
  el.classList.add('chart');
  el.setAttribute('data-chart', '');
  const holder = h('div', {class: 'chart-plot', role: 'img', 'aria-label': title || series.map(s => s.label).join(', ')});
  el.append(holder);
  let x = [];
  let ys = series.map(() => []);
  const opts = {
    width: Math.max(holder.clientWidth || el.clientWidth || 600, 200),
    height,
    title,
    scales: {x: {time: true}},
    series: [{}, ...series.map((s, i) => ({label: s.unit ? `${s.label} (${s.unit})` : s.label, stroke: palette[i % palette.length],
      width: 2, spanGaps: false, points: {show: false}}))],
    axes: [{}, {size: 60}],
    legend: {live: true},
  };
  const plot = new uPlot(opts, [x, ...ys], holder);
  const ro = new ResizeObserver(() => {
    const w = holder.clientWidth;
    if (w > 0) plot.setSize({width: w, height});
  });
  ro.observe(holder);

  const publish = () => {
    el.chartData = {x: x.slice(), series: ys.map(s => s.slice())};
    el.setAttribute('data-points', String(x.length));
    plot.setData([x, ...ys]);
  };
  return {
    set(nx, nys) {
      x = nx.slice();
      ys = nys.map(s => s.slice());
      publish();
    },
    push(t, values) {
      if (x.length && t <= x[x.length - 1]) return;
      x.push(t);
      values.forEach((v, i) => ys[i].push(typeof v === 'number' ? v : null));
      if (windowSec > 0) {
        let drop = 0;
        while (drop < x.length && x[drop] < t - windowSec) drop++;
        if (drop) {
          x.splice(0, drop);
          ys.forEach(s => s.splice(0, drop));
        }
      }
      publish();
    },
    destroy() {
      ro.disconnect();
      plot.destroy();
    },
  };
}
