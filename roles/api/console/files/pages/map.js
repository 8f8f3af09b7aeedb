// The agents' map: an equirectangular SVG plot with a graticule and a
// coarse world outline (admin-world.js), no tiles and nothing fetched,
// so it works offline and under the console's CSP. Each agent with a
// location is a labelled point in its status colour that links to the
// agent's page.
import {h, replace} from '../../lib/dom.js';
import {LAND} from './admin-world.js';

// Plot units: half a degree, as in admin-world.js.
const W = 720;
const H = 360;

// project turns a latitude/longitude in degrees into plot units.
export function project(lat, lon) {
  return [2 * (lon + 180), 2 * (90 - lat)];
}

function graticule() {
  const lines = [];
  for (let lon = -150; lon <= 150; lon += 30) {
    const [x] = project(0, lon);
    lines.push(h('svg:line', {x1: x, y1: 0, x2: x, y2: H, class: lon === 0 ? 'grid-main' : 'grid'}));
    lines.push(h('svg:text', {x: x + 2, y: H - 4, class: 'grid-label', text: `${Math.abs(lon)}°${lon < 0 ? 'W' : lon > 0 ? 'E' : ''}`}));
  }
  for (let lat = -60; lat <= 60; lat += 30) {
    const [, y] = project(lat, 0);
    lines.push(h('svg:line', {x1: 0, y1: y, x2: W, y2: y, class: lat === 0 ? 'grid-main' : 'grid'}));
    lines.push(h('svg:text', {x: 3, y: y - 3, class: 'grid-label', text: `${Math.abs(lat)}°${lat < 0 ? 'S' : lat > 0 ? 'N' : ''}`}));
  }
  return lines;
}

// statusClass keeps the class name to the statuses the stylesheet knows.
function statusClass(s) {
  return ['online', 'offline', 'never-seen', 'disabled'].includes(s) ? s : 'unknown';
}

// agentMap draws the agents that have a location ({uuid, name, status,
// location: {latitude, longitude, label}}); update(list) redraws the
// points only, for status changes from the live stream.
export function agentMap(list) {
  const points = h('svg:g', {class: 'points'});
  const svg = h('svg:svg', {viewBox: `0 0 ${W} ${H}`, class: 'agent-map', role: 'group', 'aria-label': 'Map of agent locations'},
    h('svg:rect', {x: 0, y: 0, width: W, height: H, class: 'sea'}),
    h('svg:path', {d: LAND, class: 'land'}),
    h('svg:g', {class: 'graticule', 'aria-hidden': 'true'}, graticule()),
    points);
  const update = (agents) => {
    replace(points, agents.filter(a => a.location).map((a) => {
      const [x, y] = project(a.location.latitude, a.location.longitude);
      const name = a.name || a.uuid;
      const status = a.status || 'unknown';
      return h('svg:a', {href: `#/agents/${encodeURIComponent(a.uuid)}`, class: `point status-${statusClass(status)}`,
        'data-agent': a.uuid, 'data-status': status, 'aria-label': `${name}: ${status}${a.location.label ? `, ${a.location.label}` : ''}`},
      h('svg:title', {text: `${name} (${status})${a.location.label ? ` · ${a.location.label}` : ''}`}),
      h('svg:circle', {cx: x, cy: y, r: 4.5}),
      h('svg:text', {x: x + 7, y: y + 4, class: 'point-label', text: name}));
    }));
  };
  update(list);
  return {el: h('figure', {class: 'map-wrap'}, svg,
    h('figcaption', {class: 'muted', text: 'Agents with a location (its own field, or a location tag "latitude,longitude"), coloured by status.'})), update};
}
