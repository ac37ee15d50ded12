// The console's entry point: configuration, sign-in, and a hash router (the
// fragment never reaches a server, so deep links need no server routes and
// never collide with the API's paths).
import { h, flash, errorBox, field, tickAges } from './ui.js';
import { createApi } from './api.js';
import { createSession, devSignIn, oidcSignIn, oidcCallback } from './auth.js';
import { spacesList, spaceDetail } from './spaces.js';
import { accounts, clusterPicker } from './accounts.js';
import { environments, environmentDetail } from './environments.js';
import { jobs } from './jobs.js';
import { policies } from './policies.js';
import { integrations, integrationDetail, watchDisabled } from './integrations.js';
import { activity } from './activity.js';

const main = document.getElementById('main');
const session = createSession();
let cfg;
let cleanup = [];
// generation counts the views shown: a view's timers and drawing belong to
// its generation only, so an answer that arrives after the user moved on
// changes nothing on screen.
let generation = 0;

const routes = [
  [/^#\/spaces\/([0-9a-fA-F-]{36})$/, spaceDetail],
  [/^#\/spaces$/, spacesList],
  [/^#\/connect$/, accounts],
  [/^#\/accounts\/([0-9a-fA-F-]{36})\/clusters$/, clusterPicker],
  [/^#\/environments\/([0-9a-fA-F-]{36})$/, environmentDetail],
  [/^#\/environments$/, environments],
  [/^#\/jobs$/, jobs],
  [/^#\/policies$/, policies],
  [/^#\/integrations\/([0-9a-fA-F-]{36})$/, integrationDetail],
  [/^#\/integrations$/, integrations],
  [/^#\/activity$/, activity],
];

function signedOut(message) {
  session.clear();
  render(message);
}

const api = createApi(session, () => signedOut('Your session has expired: sign in again.'));

function stop() { generation++; current = null; for (const f of cleanup) f(); cleanup = []; }

// current is the view on screen: its route, its arguments, and what it does
// with a new URL of its own (onHash), if it takes one in place.
let current = null;

// ctx is what every view gets: the API, the config, timers tied to the view.
function context() {
  const mine = generation;
  return {
    api, cfg, session,
    // every runs fn now and every refresh_seconds until the view changes;
    // a tick never overlaps the previous one. A view that has been left
    // (its first answers came late) starts no timer. A hidden tab (another
    // tab in front, a minimised window) asks nothing: a console left open
    // all day costs the API only while someone can see it, and it asks at
    // once when it is shown again.
    every(fn) {
      if (mine !== generation) return Promise.resolve();
      let busy = false, live = true;
      const tick = async () => { if (busy || !live || document.hidden) return; busy = true; try { await fn(); } finally { busy = false; } };
      const shown = () => { if (!document.hidden) tick(); };
      const id = setInterval(tick, (cfg.refresh_seconds || 10) * 1000);
      document.addEventListener('visibilitychange', shown);
      cleanup.push(() => { live = false; clearInterval(id); document.removeEventListener('visibilitychange', shown); });
      return tick();
    },
    onLeave(fn) { if (mine === generation) cleanup.push(fn); else fn(); },
    // onHash: a new URL for the same view (its query changed) is handed to
    // fn instead of drawing the view afresh.
    onHash(fn) { if (mine === generation && current) current.onHash = fn; },
    go(hash) { location.hash = hash; },
  };
}

function signInView(message) {
  const note = message ? h('div', { class: 'alert warn', role: 'alert' }, message) : null;
  if (cfg.sign_in === 'dev') {
    // Chromium compiles pattern with the v flag, where a class's '-' must be escaped.
    const org = h('input', { id: 'org-input', name: 'org', required: true, autocomplete: 'organization', value: 'acme', pattern: '[A-Za-z0-9._:\\-]{1,128}' });
    const err = h('div');
    const form = h('form', { class: 'card' }, h('h1', null, 'Sign in'), note,
      h('p', { class: 'muted' }, 'Development sign-in (local stack only): a token for any org, signed with the key ', h('code', null, 'make token'), ' uses.'),
      field('Org', org, 'Everything you see and do belongs to this org.'),
      err, h('button', { class: 'primary', type: 'submit' }, 'Sign in'));
    form.addEventListener('submit', async e => {
      e.preventDefault();
      try { await devSignIn(cfg, session, org.value.trim()); route(); } catch (x) { err.replaceChildren(errorBox(x, 'Sign-in failed')); }
    });
    return h('div', { class: 'signin' }, form);
  }
  const err = h('div');
  const btn = h('button', { class: 'primary', type: 'button' }, 'Sign in');
  btn.addEventListener('click', () => oidcSignIn(cfg).catch(x => err.replaceChildren(errorBox(x, 'Sign-in failed'))));
  return h('div', { class: 'signin' }, h('div', { class: 'card' }, h('h1', null, 'Sign in'), note,
    h('p', null, 'Sign in with your organisation’s identity provider (', h('code', null, cfg.issuer), ').'), err, btn));
}

function render(message) {
  stop();
  const signed = !!session.token();
  document.getElementById('nav').hidden = !signed;
  document.getElementById('who').hidden = !signed;
  if (!signed) { main.replaceChildren(signInView(message)); return; }
  document.getElementById('org').textContent = `org ${session.org()}`;
  route();
}

function route() {
  if (!session.token()) { stop(); render(); return; }
  document.getElementById('nav').hidden = false;
  document.getElementById('who').hidden = false;
  document.getElementById('org').textContent = `org ${session.org()}`;
  const hash = location.hash.split('?')[0] || '#/spaces';
  for (const a of document.querySelectorAll('nav a')) {
    const here = hash === a.getAttribute('href') || hash.startsWith(a.getAttribute('href') + '/') || (a.getAttribute('href') === '#/connect' && hash.startsWith('#/accounts/'));
    if (here) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (hash === '#' || hash === '#/') { stop(); location.replace('#/spaces'); return; }
  // A disabled webhook endpoint is marked on the nav item from any screen.
  watchDisabled(api, false, session.org());
  const found = routes.map(([re, view]) => [hash.match(re), view]).find(([m]) => m);
  const key = found && `${routes.findIndex(([, v]) => v === found[1])}:${found[0].slice(1)}`;
  if (found && current && current.key === key && current.onHash) { current.onHash(); return; }
  stop();
  // Each view draws into its own element: once the user has moved on, it is
  // off the page, so a slow answer cannot draw the screen they left.
  const root = h('div', { class: 'view' }, h('p', { class: 'loading' }, 'Loading…'));
  main.replaceChildren(root);
  main.focus({ preventScroll: true });
  if (found) {
    const [m, view] = found;
    current = { key };
    view(root, m.slice(1), context()).catch(x => root.replaceChildren(errorBox(x, 'This page could not be loaded')));
    return;
  }
  root.replaceChildren(h('h1', null, 'No such page'),
    h('p', { id: 'not-found' }, 'The console has no page at ', h('code', null, hash), '. ', h('a', { href: '#/spaces' }, 'Go to the spaces')));
}

async function start() {
  // The server writes the configuration into the page: no request for it
  // (GET /console/config.json answers the same document).
  try {
    cfg = JSON.parse(document.querySelector('meta[name="spaces-config"]').content);
  } catch {
    main.replaceChildren(h('div', { class: 'alert error', role: 'alert' }, 'The console’s configuration could not be loaded: reload the page.'));
    return;
  }
  document.getElementById('signout').addEventListener('click', () => { signedOut(); flash('Signed out.'); });
  window.addEventListener('hashchange', route);
  if (cfg.sign_in === 'oidc') {
    try { await oidcCallback(cfg, session); } catch (x) { render(x.message); return; }
  }
  if (!location.hash) location.replace('#/spaces');
  tickAges(document.body);
  render();
}

start();
