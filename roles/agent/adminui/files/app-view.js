// What the apps list and the app page share: the services table, whose
// state cells refresh in place (the keyboard focus stays where it is),
// the action buttons, the runtime line and the live log view.
import {h, replace, badge, fmtTime} from '../lib/dom.js';
import {openStream} from '../lib/sse.js';
import {run, status} from './util.js';

const enc = encodeURIComponent;

// stateCell shows a service's state, the runtime's status text and the
// last reconciling failure with its retries.
export function stateCell(s) {
  const kind = s.state === 'running' ? 'running' : s.state === 'unknown' || s.state === 'missing' ? 'error' : 'stopped';
  return h('span', {},
    badge(s.state || 'unknown', s.error ? 'error' : kind),
    s.target && s.target !== s.state ? h('span', {class: 'muted', text: ` → ${s.target}`}) : null,
    s.status ? h('div', {class: 'muted', text: s.status}) : null,
    s.error ? h('div', {class: 'field-error', 'data-error': s.serviceName,
      text: `${s.error}${s.retries ? ` (attempt ${s.retries}${s.nextRetry ? `, next at ${fmtTime(s.nextRetry)}` : ''})` : ''}`}) : null);
}

// runtimeLine shows the container runtime's state.
export function runtimeLine(rt) {
  rt = rt || {};
  return h('p', {},
    'Container runtime: ', badge(rt.status || 'unknown', rt.status === 'connected' ? 'connected' : 'error'),
    rt.version ? h('span', {class: 'muted', text: ` ${rt.version}`}) : null,
    rt.error ? h('span', {class: 'field-error', text: ` ${rt.error}`}) : null);
}

// servicesTable lists an app's services with their actions; cells maps
// "appId/serviceName" to each state cell, for refresh in place. more(s)
// adds buttons of the caller.
export function servicesTable(api, app, msg, reload, cells, more = () => null) {
  return h('table', {class: 'grid', 'data-services': app.appName},
    h('thead', {}, h('tr', {}, ['Service', 'Image', 'State', 'Ports', 'Actions'].map(t => h('th', {scope: 'col', text: t})))),
    h('tbody', {}, (app.services || []).map(s => {
      const cell = h('td', {'data-state': `${app.appName}/${s.serviceName}`}, stateCell(s));
      cells.set(`${app.appId}/${s.serviceName}`, cell);
      const act = (action) => h('button', {type: 'button', class: 'secondary', text: action[0].toUpperCase() + action.slice(1),
        'data-action': `${s.serviceName}/${action}`, 'aria-label': `${action} ${s.serviceName}`,
        onclick: () => run(msg, async () => {
          await api.post(`/apps/${app.appId}/services/${enc(s.serviceName)}/${action}`);
          status(msg, 'ok', `${s.serviceName}: ${action} done.`);
          await reload();
        })});
      return h('tr', {'data-service': s.serviceName},
        h('td', {text: s.serviceName}),
        h('td', {class: 'mono', text: s.imageName}),
        cell,
        h('td', {class: 'mono', text: ((s.config || {}).ports || []).join(', ') || '—'}),
        h('td', {}, h('div', {class: 'row-actions'}, act('start'), act('stop'), act('restart'), more(s))));
    })));
}

// structure is what decides whether a table is drawn again or only its
// state cells refreshed.
export function structure(apps) {
  return JSON.stringify(apps.map(a => [a.appId, a.appName, (a.services || []).map(s => [s.serviceName, s.imageName, (s.config || {}).ports])]));
}

// refreshCells puts fresh states in the cells of an unchanged structure.
export function refreshCells(apps, cells) {
  for (const a of apps) {
    for (const s of a.services || []) {
      const c = cells.get(`${a.appId}/${s.serviceName}`);
      if (c) replace(c, stateCell(s));
    }
  }
}

const maxLogLines = 2000;

// logView follows a service's log over the SSE route; the admin session
// cookie is the credential. After a reconnect the tail arrives again, so
// the view starts over. It returns {el, stop}.
export function logView(appId, service) {
  const lines = h('div', {class: 'log-view mono', id: 'app-log', role: 'log', 'aria-live': 'off', tabindex: '0'});
  const state = h('p', {class: 'muted', id: 'log-state', 'aria-live': 'polite'});
  const url = `/v1/apps/${appId}/services/${enc(service)}/logs?follow=true&tail=200`;
  const stop = openStream(url, {
    onEvent: (event, data) => {
      let v;
      try { v = JSON.parse(data); } catch { return; }
      if (event === 'error') {
        replace(state, h('span', {class: 'field-error', text: v.error || data}));
        return;
      }
      const stick = lines.scrollTop + lines.clientHeight >= lines.scrollHeight - 4;
      lines.append(h('div', {class: `log-line${v.stream === 'stderr' ? ' stderr' : ''}`, text: v.msg}));
      while (lines.childElementCount > maxLogLines) lines.firstChild.remove();
      if (stick) lines.scrollTop = lines.scrollHeight;
    },
    onState: (st, why, delay) => {
      if (st === 'open') {
        replace(lines);
        replace(state, `Following ${service}.`);
      } else if (st === 'retrying') {
        replace(state, `Disconnected (${why}); trying again in ${Math.round(delay / 1000)} s.`);
      } else if (st === 'closed') {
        replace(state, 'Stopped.');
      }
    },
  });
  return {el: h('div', {}, state, lines), stop};
}
