// A hash router for the consoles: the server has one page, and each
// console page is a module listed once in its console's pages.js
// (docs/web-consoles.md, "Adding a page"). A page is
//   {path: '/devices/:protocol/:name', title: 'Device', nav: 'Devices',
//    render(ctx) -> cleanup function | undefined (may be async)}
// ctx holds {root, params, query, app, navigate, onCleanup}. Whatever a
// page starts (timers, streams) it stops in its cleanup or through
// ctx.onCleanup, which the router calls when the page is left.

import {h, replace} from './dom.js';

export function compile(path) {
  const names = [];
  const re = new RegExp('^' + path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\/:([A-Za-z_]+)/g, (_, n) => {
    names.push(n);
    return '/([^/]+)';
  }) + '/?$');
  return (p) => {
    const m = re.exec(p);
    if (!m) return null;
    const params = {};
    names.forEach((n, i) => { params[n] = decodeURIComponent(m[i + 1]); });
    return params;
  };
}

export class Router {
  // pages: the console's page list; root: where pages render; app: what
  // pages share (the API client, the user); onRoute(page) updates the
  // navigation.
  constructor({pages, root, app, fallback = '/', onRoute = () => {}}) {
    this.routes = pages.map(p => ({page: p, match: compile(p.path)}));
    this.root = root;
    this.app = app;
    this.fallback = fallback;
    this.onRoute = onRoute;
    this.cleanups = [];
    this.seq = 0;
    window.addEventListener('hashchange', () => this.render());
  }

  navigate(path) {
    if (location.hash === '#' + path) this.render();
    else location.hash = path;
  }

  leave() {
    for (const fn of this.cleanups.splice(0)) {
      try { fn(); } catch (err) { console.warn(err); }
    }
  }

  async render() {
    const raw = location.hash.replace(/^#/, '') || this.fallback;
    const [path, q = ''] = raw.split('?');
    this.leave();
    const seq = ++this.seq;
    for (const {page, match} of this.routes) {
      const params = match(path);
      if (!params) continue;
      document.title = `${page.title} · ${this.app.name || 'edgeplat'}`;
      this.onRoute(page, path);
      const view = h('section', {class: 'page', 'aria-labelledby': 'page-title'});
      replace(this.root, view);
      const ctx = {root: view, params, query: new URLSearchParams(q), app: this.app,
        navigate: (p) => this.navigate(p), onCleanup: (fn) => this.cleanups.push(fn), stale: () => seq !== this.seq};
      try {
        const cleanup = await page.render(ctx);
        if (typeof cleanup === 'function') {
          if (seq === this.seq) this.cleanups.push(cleanup);
          else cleanup();
        }
      } catch (err) {
        if (seq === this.seq) replace(view, h('h1', {id: 'page-title', text: page.title}), errorBox(err));
      }
      const heading = view.querySelector('h1');
      if (heading && seq === this.seq) {
        heading.setAttribute('tabindex', '-1');
        heading.focus({preventScroll: true});
      }
      return;
    }
    this.navigate(this.fallback);
  }
}

// errorBox shows an error the way every page does.
export function errorBox(err) {
  return h('div', {class: 'alert error', role: 'alert', text: err && err.message ? err.message : String(err)});
}
