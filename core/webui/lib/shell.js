// The frame every console page sits in: a skip link, the navigation
// built from the pages that name a nav entry, who is logged in, and the
// main area the router renders into.

import {h} from './dom.js';

export function shell({name, pages, user, onLogout}) {
  const links = pages.filter(p => p.nav).map(p => {
    const a = h('a', {href: '#' + (p.navPath || p.path), text: p.nav});
    return {page: p, a, li: h('li', {}, a)};
  });
  const main = h('main', {id: 'main', tabindex: '-1'});
  const root = h('div', {class: 'layout'},
    h('a', {class: 'skip', href: '#main', onclick: (e) => { e.preventDefault(); main.focus(); }, text: 'Skip to content'}),
    h('nav', {'aria-label': 'Main'},
      h('div', {class: 'brand', text: name}),
      h('ul', {}, links.map(l => l.li)),
      h('div', {class: 'who'}, user ? `Signed in as ${user}` : '', ' ',
        onLogout ? h('button', {type: 'button', class: 'secondary', id: 'logout', onclick: onLogout, text: 'Log out'}) : null)),
    main);
  const mark = (page, path) => {
    for (const l of links) {
      const base = l.page.navPath || l.page.path;
      const here = l.page === page || (base !== '/' && path.startsWith(base + '/')) || (page.navGroup && page.navGroup === l.page.nav);
      if (here) l.a.setAttribute('aria-current', 'page');
      else l.a.removeAttribute('aria-current');
    }
  };
  return {root, main, mark};
}
