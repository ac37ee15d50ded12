// Environments (gates, create with the environment picker, re-bind, the
// org's stopped revisions) and their deployment revisions (push, watch,
// re-enqueue stopped ones).
import { h, badge, providerMark, errorBox, field, empty, flash, showFieldErrors, when, refreshAges, validate, patterned, tombstone, tombstoneOf } from './ui.js';
import { qs, rotation } from './api.js';

// spaceChooser is a name search beside a short select of the spaces the
// environment picker allows (the API leaves out inactive ones): the first
// 20 matches in name order, so the page never lists a whole fleet. except
// is a space not to offer (the one an environment is bound to now).
function spaceChooser(api, id, except) {
  const q = h('input', { id: `${id}-q`, type: 'search', maxlength: 100, autocomplete: 'off', placeholder: 'part of a name', 'aria-label': 'Find a space by name' });
  const sel = h('select', { id, name: 'space_id', required: true, 'data-field': 'space_id' }, h('option', { value: '' }, 'Loading spaces…'));
  let timer, asked = 0;
  async function load() {
    const mine = ++asked, term = q.value.trim();
    let page;
    try {
      // The API leaves the synthetic placeholders out too, so they never
      // take the 20 places of the spaces that can be chosen.
      // A search (by word prefix) has its own order; no search is by name.
      const words = /[\p{L}\p{N}]/u.test(term) ? term : '';
      page = await api.get('/spaces' + qs({ picker: 'environment', sort: words ? '' : 'name', name_contains: words, synthetic: 'false', limit: '20' }));
    } catch (x) {
      if (mine === asked) sel.replaceChildren(h('option', { value: '' }, 'The spaces could not be loaded: type to try again'));
      return;
    }
    if (mine !== asked) return; // an older answer than the one in view
    const keep = sel.value;
    // A synthetic space is a placeholder with no cluster: nothing to deploy to.
    const items = page.items.filter(sp => sp.id !== except && !sp.synthetic);
    sel.replaceChildren(h('option', { value: '' }, items.length ? 'Choose a space…' : term ? 'No space matches' : 'No space can take an environment now'),
      ...items.map(sp => spaceOption(sp, sp.id === keep)),
      page.next_cursor ? h('option', { value: '', disabled: true }, 'More spaces: type part of a name') : null);
  }
  q.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(load, 150); });
  load();
  return { q, sel };
}

function spaceOption(sp, selected) {
  return h('option', { value: sp.id, selected, 'data-connectivity': sp.connectivity || 'direct' }, `${sp.name} · ${sp.provider} · ${sp.status}${sp.synthetic ? ' · synthetic' : ''}`);
}

export async function environments(root, _, ctx) {
  const { api } = ctx;
  const list = h('div', null, h('p', { class: 'loading' }, 'Loading environments…'));
  const error = h('div');
  const name = h('input', { id: 'env-name', name: 'name', required: true, maxlength: 100, 'data-field': 'name', autocomplete: 'off' });
  const chooser = spaceChooser(api, 'env-space');
  const space = chooser.sel;
  const ns = patterned({ id: 'env-namespace', name: 'namespace', 'data-field': 'namespace' }, 'namespace');
  const err = h('div');
  const check = namespaceCheck(api, space, name, ns);
  const nsResult = h('div', { id: 'env-ns-result', role: 'status' });
  const form = h('form', { class: 'card', id: 'env-form', 'aria-labelledby': 'env-title', novalidate: true }, h('h2', { id: 'env-title' }, 'Create an environment'),
    h('div', { class: 'row' }, field('Name', name), field('Find a space', chooser.q), field('Space', space, 'Inactive spaces are not offered.'), field('Namespace', ns, 'Optional: defaults to the name.')),
    check.el, err, h('button', { class: 'primary', type: 'submit' }, 'Create environment'), nsResult);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const body = { name: name.value.trim(), space_id: space.value };
    if (ns.value.trim()) body.namespace = ns.value.trim();
    try {
      const invalid = validate(form);
      if (invalid) throw invalid;
      const alsoNamespace = check.wanted();
      const env = await api.post('/environments', body);
      showFieldErrors(form, null); err.replaceChildren();
      flash(`Environment ${env.name} created.`);
      nsResult.replaceChildren();
      // The namespace after the environment: an environment refused
      // leaves no namespace behind.
      if (alsoNamespace) nsResult.replaceChildren(await createNamespace(api, alsoNamespace, env));
      form.reset();
      check.clear();
      await refresh(true);
    } catch (x) {
      const rest = showFieldErrors(form, x);
      err.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The environment was not created') : '');
    }
  });
  const stopped = h('div', { id: 'stopped-revisions' }, h('p', { class: 'loading' }, 'Loading revisions…'));
  root.replaceChildren(h('h1', null, 'Environments'), error, h('div', { class: 'card' }, list),
    h('div', { class: 'card' }, h('h2', null, 'Stopped revisions'),
      h('p', { class: 'muted' }, 'Revisions that stopped on an inactive space, most recently stopped first: re-enqueue each once its space is active.'), stopped),
    form);

  // The org's stopped revisions (GET /revisions?state=stopped), each with
  // its Re-enqueue once its space is active; rebuilt only when they or
  // their spaces' statuses changed.
  let stoppedPage = null, lastStopped = '';
  async function drawStopped() {
    const page = stoppedPage;
    if (!page) return;
    const revs = page.items;
    const spaces = new Map(), gone = new Map();
    for (const r of revs) {
      if (!spaces.has(r.space_id)) spaces.set(r.space_id, await api.get(`/spaces/${r.space_id}`).catch(x => { if (x.status !== 404) throw x; gone.set(r.space_id, tombstoneOf(x)); return null; }));
    }
    const sig = JSON.stringify([revs.map(r => [r.id, r.version]), [...spaces.values()].map(sp => sp && sp.status), page.next_cursor ? 1 : 0]);
    if (sig === lastStopped) return;
    lastStopped = sig;
    if (!revs.length) { stopped.replaceChildren(empty('No stopped revision.')); return; }
    stopped.replaceChildren(h('table', { class: 'stack', id: 'stopped-table' },
      h('thead', null, h('tr', null, ['Revision', 'State', 'Attempts', 'Updated', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, revs.map(r => revisionRow(r, spaces.get(r.space_id), ctx, () => refresh(true), gone.get(r.space_id))))),
      page.next_cursor ? h('p', { class: 'muted' }, `The ${STOPPED} most recently stopped.`) : '');
  }
  async function stoppedChanged(p) {
    stoppedPage = p;
    try { await drawStopped(); } catch (x) { stopped.replaceChildren(errorBox(x, 'The stopped revisions could not be loaded')); }
  }

  // Rebinding controls stay as they are while the list refreshes, so a
  // choice in progress is not lost: rows are rebuilt only when data changed.
  // A tick polls one thing, the environments, the fleet's counts and the
  // stopped revisions in turn, each with its ETag; only a change reads the
  // environments and their spaces again (a status change moves the
  // counts, and may enable a Re-enqueue).
  const SOURCES = ['/environments?limit=100', '/space-counts', `/revisions?state=stopped&limit=${STOPPED}`];
  let lastSig = '', ticks = 0, loaded = false;
  async function refresh(force) {
    try {
      let changed = force === true || !loaded;
      if (!changed) {
        const i = ticks++ % SOURCES.length, r = await api.poll(SOURCES[i]);
        if (i === 2) { error.replaceChildren(); refreshAges(root); if (r.changed) await stoppedChanged(r.data); return; }
        changed = r.changed;
      }
      error.replaceChildren();
      refreshAges(root);
      if (!changed) return;
      if (!loaded) { await Promise.all(SOURCES.slice(0, 2).map(p => api.poll(p))); loaded = true; }
      // The stopped revisions follow a status change or the user's own action.
      const stoppedNow = force === true || !stoppedPage ? api.poll(SOURCES[2]).then(r => r.data) : Promise.resolve(stoppedPage);
      await stoppedNow.then(stoppedChanged, x => stopped.replaceChildren(errorBox(x, 'The stopped revisions could not be loaded')));
      const envs = await api.all('/environments');
      const ids = [...new Set(envs.map(e => e.space_id))];
      const spaces = await Promise.all(ids.map(id => api.get(`/spaces/${id}`).catch(() => null)));
      const byId = new Map(spaces.filter(Boolean).map(s => [s.id, s]));
      const sig = JSON.stringify(envs.map(e => [e.id, e.version, e.gate, byId.get(e.space_id) && byId.get(e.space_id).status]));
      if (sig === lastSig) return;
      lastSig = sig;
      if (!envs.length) { list.replaceChildren(empty('No environment yet: create one below, bound to an active space.')); return; }
      list.replaceChildren(h('table', { class: 'stack', id: 'env-table' },
        h('thead', null, h('tr', null, ['Environment', 'Space', 'Namespace', 'State'].map(t => h('th', { scope: 'col' }, t)))),
        h('tbody', null, envs.map(e => envRow(e, byId.get(e.space_id), ctx, () => refresh(true))))));
    } catch (x) {
      error.replaceChildren(errorBox(x, 'The environments could not be loaded'));
    }
  }
  await ctx.every(refresh);
}

// namespaceCheck says whether the namespace the form would bind exists on
// the chosen space's cluster (an agent space: as its agent last reported),
// and offers to create it when it does not; the first push into a missing
// namespace fails. The space's list is asked once per choice of space, not
// polled.
function namespaceCheck(api, space, name, ns) {
  const el = h('div', { id: 'env-ns-check', 'aria-live': 'polite' });
  let listed = null, asked = 0, timer, offer = null;
  const wanted = () => ns.value.trim() || name.value.trim();
  const valid = v => /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(v) && v.length <= 63;
  let drawn = '';
  function draw() {
    const v = wanted();
    // Redrawn only when what it says changes, so the offer's tick stays.
    const key = JSON.stringify([space.value, v, listed]);
    if (key === drawn && listed) return;
    drawn = key;
    offer = null;
    if (!space.value || !listed || !valid(v)) { el.replaceChildren(); delete el.dataset.state; return; }
    if (listed.error) {
      el.dataset.state = 'unknown';
      el.replaceChildren(h('p', { class: 'alert warn' }, `The cluster’s namespaces could not be listed (${listed.error}): the first push will fail until the namespace `, h('code', null, v), ' exists on it.'));
      return;
    }
    if (listed.waiting) {
      el.dataset.state = 'unknown';
      el.replaceChildren(h('p', { class: 'alert warn' }, 'The agent has not reported the cluster’s namespaces yet: the first push will fail until the namespace ', h('code', null, v), ' exists on it.'));
      return;
    }
    if (listed.pending.has(v)) {
      el.dataset.state = 'pending';
      el.replaceChildren(h('p', { class: 'muted' }, 'The namespace ', h('code', null, v), ' is requested: the agent creates it at its next connection.'));
      return;
    }
    if (listed.names.has(v)) {
      el.dataset.state = 'exists';
      el.replaceChildren(h('p', { class: 'muted' }, 'The namespace ', h('code', null, v), ' exists on the cluster.'));
      return;
    }
    el.dataset.state = 'missing';
    offer = h('input', { type: 'checkbox', id: 'env-ns-create', checked: true });
    el.replaceChildren(h('p', { class: 'alert warn' }, 'The namespace ', h('code', null, v), ' does not exist on the cluster: the first push will fail until it does.'),
      h('label', { class: 'check', for: 'env-ns-create' }, offer, ` Create namespace ${v} too`));
  }
  async function load() {
    const mine = ++asked, id = space.value;
    listed = null; draw();
    if (!id) return;
    let got;
    try {
      const list = await api.get(`/space-discovery/${id}/namespaces`);
      const opt = space.selectedOptions[0];
      // An agent space's list is its agent's last report: none yet says nothing.
      got = { names: new Set(list.items.map(n => n.name)), pending: new Set((list.pending || []).map(n => n.name)),
        waiting: !!opt && opt.dataset.connectivity === 'agent' && !list.observed_at };
    } catch (x) {
      got = { error: (x.problem && (x.problem.reason || x.problem.title)) || x.message || 'no answer' };
    }
    if (mine !== asked) return;
    listed = got;
    draw();
  }
  space.addEventListener('change', load);
  for (const input of [name, ns]) input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(draw, 150); });
  return {
    el,
    wanted: () => (offer && offer.checked && el.dataset.state === 'missing' ? { name: wanted(), space_id: space.value } : null),
    clear: () => { asked++; listed = null; draw(); },
  };
}

// createNamespace creates the new environment's namespace with the route
// the space's page uses, and says what came of it.
async function createNamespace(api, want, env) {
  try {
    await api.post(`/space-discovery/${want.space_id}/namespaces`, { name: env.namespace });
    return h('p', { 'data-ns-result': 'created' }, 'Namespace ', h('code', null, env.namespace), ' created for ', env.name, '.');
  } catch (x) {
    if (x.status === 409) return h('p', { 'data-ns-result': 'exists' }, 'Namespace ', h('code', null, env.namespace), ' exists already.');
    return h('div', { 'data-ns-result': 'failed' }, errorBox(x, `Environment ${env.name} was created, but its namespace ${env.namespace} was not`),
      h('p', null, 'Create it on the ', h('a', { href: `#/spaces/${want.space_id}` }, 'space’s page'), ' before the first push.'));
  }
}

function envRow(e, sp, ctx, refresh) {
  const state = h('td', { 'data-label': 'State' });
  if (e.gate) {
    state.append(h('div', { class: 'alert warn gate', role: 'status', 'data-gate': e.gate.reason }, h('strong', null, e.gate.reason), ' since ', when(e.gate.since),
      ': no new deployment until it is re-bound.'), rebind(e, ctx, refresh));
  } else if (sp && sp.status === 'inactive') {
    state.append(h('div', { class: 'alert warn gate', role: 'status', 'data-gate': 'Space inactive' }, h('strong', null, 'Space inactive'),
      sp.probe && sp.probe.reason ? ` (${sp.probe.reason})` : '', ': a revision pushed now waits for it, and stops if it stays inactive.'), rebind(e, ctx, refresh));
  } else {
    state.append(h('span', { class: 'badge s-active' }, 'ready'));
  }
  return h('tr', { 'data-env': e.name },
    h('td', { 'data-label': 'Environment' }, h('a', { href: `#/environments/${e.id}` }, e.name)),
    h('td', { 'data-label': 'Space' }, sp ? [providerMark(sp.provider, false), ' ', h('a', { href: `#/spaces/${sp.id}` }, sp.name), ' ', badge(sp.status)]
      : e.gate && e.gate.space ? tombstone(e.gate.space) : h('span', { class: 'muted' }, `deregistered space ${e.space_id.slice(0, 8)}…`)),
    h('td', { 'data-label': 'Namespace' }, h('code', null, e.namespace)), state);
}

function rebind(e, ctx, refresh) {
  const id = `rebind-${e.id}`;
  const { q, sel } = spaceChooser(ctx.api, id, e.space_id);
  const err = h('div');
  const btn = h('button', { type: 'submit' }, 'Re-bind');
  const form = h('form', { class: 'row rebind', 'aria-label': `Re-bind ${e.name}` }, q, h('label', { for: id }, 'Re-bind to'), sel, btn, err);
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    if (!sel.value) { err.replaceChildren(h('span', { class: 'err' }, 'Choose a space first.')); return; }
    btn.disabled = true;
    try {
      await ctx.api.put(`/environments/${e.id}/space`, { space_id: sel.value });
      flash(`${e.name} re-bound.`);
      await refresh();
    } catch (x) {
      btn.disabled = false;
      err.replaceChildren(errorBox(x, `${e.name} was not re-bound`));
    }
  });
  return form;
}

// STOPPED is how many stopped revisions the environments page shows.
const STOPPED = 100;

// ---- one environment and its revisions --------------------------------------
// The revisions come from GET /environments/{id}/revisions (newest first, a
// page at a time), so a teammate's pushes show too.

// PAGE is how many of the newest revisions the page shows.
const PAGE = 50;

const SAMPLE = JSON.stringify([{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'hello' }, data: { greeting: 'hello' } }], null, 2);

export async function environmentDetail(root, [id], ctx) {
  const { api } = ctx;
  const env = await api.get(`/environments/${id}`);
  const revs = h('div', { id: 'revisions' });
  const manifests = h('textarea', { id: 'manifests', rows: 8, 'data-field': 'manifests', spellcheck: 'false' });
  let pushBtn, pushNote;
  manifests.value = SAMPLE;
  const err = h('div');
  const push = h('form', { class: 'card', id: 'push-form', 'aria-labelledby': 'push-title' }, h('h2', { id: 'push-title' }, 'Push a revision'),
    field('Manifests (a JSON array of Kubernetes objects)', manifests), err, pushNote = h('p', { class: 'muted', id: 'push-note' }),
    pushBtn = h('button', { class: 'primary', type: 'submit', 'aria-describedby': 'push-note' }, 'Push revision'));
  push.addEventListener('submit', async e => {
    e.preventDefault();
    let list;
    try { list = JSON.parse(manifests.value); } catch (x) { err.replaceChildren(h('p', { class: 'err', role: 'alert' }, `The manifests are not JSON: ${x.message}`)); return; }
    try {
      await api.post(`/environments/${id}/revisions`, { manifests: list });
      err.replaceChildren();
      flash('Revision queued.');
      await load();
    } catch (x) {
      showFieldErrors(push, x);
      err.replaceChildren(errorBox(x, 'The revision was not pushed'));
    }
  });
  const head = h('div');
  root.replaceChildren(h('p', null, h('a', { href: '#/environments' }, '← Environments')), head, h('div', { class: 'card' }, h('h2', null, 'Revisions'), revs), push);

  // A tick asks one of the revisions, the environment and the fleet's
  // counts (a space's status decides the banner and a Re-enqueue), in turn;
  // a change reads the spaces again and redraws.
  let e = env, revPage = null, lastSig = '';
  const seen = { open: new Set(), text: new Map() };
  async function draw() {
    if (!revPage) return;
    let sp = null, gone = e.gate && e.gate.space;
    try { sp = await api.get(`/spaces/${e.space_id}`); } catch (x) { if (x.status !== 404) throw x; gone = gone || tombstoneOf(x); }
    const rows = revPage.items;
    // A stopped revision's Re-enqueue depends on its own space, which an
    // earlier binding may have made another one than the environment's.
    const spaces = new Map([[e.space_id, { sp, gone }]]);
    for (const x of rows) {
      if (x.state === 'stopped' && !spaces.has(x.space_id)) {
        spaces.set(x.space_id, await api.get(`/spaces/${x.space_id}`).then(s => ({ sp: s }), y => { if (y.status !== 404) throw y; return { sp: null, gone: tombstoneOf(y) }; }));
      }
    }
    // Rebuilt only when something changed, so a button is not replaced
    // under the pointer.
    const sig = JSON.stringify([e.version, [...spaces.values()].map(v => v.sp && [v.sp.status, v.sp.probe && v.sp.probe.reason]), rows.map(x => [x.id, x.version]), revPage.next_cursor ? 1 : 0]);
    if (sig === lastSig) return;
    lastSig = sig;
    // A gated environment takes no revision (the API answers 409): say so
    // before the push, not after. An inactive space takes it, to wait.
    pushBtn.disabled = !!e.gate;
    pushNote.textContent = e.gate ? `Gated (${e.gate.reason}): re-bind it on the environments page to push again.`
      : sp && sp.status !== 'active' ? `Its space is ${sp.status}: a revision pushed now waits for it, and stops if it stays ${sp.status}.` : '';
    head.replaceChildren(h('h1', null, e.name),
      h('p', null, 'Bound to ', sp ? [h('a', { href: `#/spaces/${sp.id}` }, sp.name), ' ', badge(sp.status, sp.probe && sp.probe.reason)]
        : gone ? ['the space ', tombstone(gone)] : 'a deregistered space', ', namespace ', h('code', null, e.namespace)),
      e.gate ? h('div', { class: 'alert warn', role: 'status' }, h('strong', null, e.gate.reason), ': re-bind it on the ', h('a', { href: '#/environments' }, 'environments page'), ' to deploy again.') : '',
      missingNamespace(rows, e, sp));
    if (!rows.length) { revs.replaceChildren(empty('No revision pushed to this environment yet.')); return; }
    revs.replaceChildren(h('table', { class: 'stack', id: 'rev-table' },
      h('thead', null, h('tr', null, ['Revision', 'State', 'Attempts', 'Updated', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, rows.map(x => { const v = spaces.get(x.space_id) || {}; return revisionRow(x, v.sp || null, ctx, load, v.gone, seen); }))),
      revPage.next_cursor ? h('p', { class: 'muted' }, `The ${PAGE} newest revisions.`) : '');
  }
  const tick = rotation(api, [
    { path: () => `/environments/${id}/revisions?limit=${PAGE}`, changed: p => { revPage = p; return draw(); } },
    { path: () => `/environments/${id}`, changed: x => { e = x; return draw(); } },
    { path: () => '/space-counts', changed: () => draw() },
  ]);
  // After the user's own action (a push, a re-enqueue): read it all now.
  async function load() {
    [e, revPage] = await Promise.all([api.get(`/environments/${id}`), api.get(`/environments/${id}/revisions?limit=${PAGE}`)]);
    await draw();
  }
  await ctx.every(() => tick().then(() => refreshAges(root)).catch(x => revs.replaceChildren(errorBox(x, 'The revisions could not be loaded'))));
}

// missingNamespace is a hint when the latest revision that reached the
// cluster failed because the namespace is not there: the cluster's answer
// (the revision's reason) names it, `namespaces "web" not found`.
function missingNamespace(rows, e, sp) {
  const last = rows.find(r => r.state === 'deployed' || r.state === 'failed');
  const m = last && last.state === 'failed' && /namespaces "([^"]+)" not found/.exec(last.reason || '');
  if (!m) return '';
  return h('div', { class: 'alert warn', role: 'status', id: 'ns-missing' }, h('strong', null, 'No namespace ', h('code', null, m[1]), ' on the cluster'),
    ': the latest revision failed because the namespace does not exist. Create it on ',
    sp ? h('a', { href: `#/spaces/${sp.id}` }, `${sp.name}’s page`) : 'the space’s page', ' (Create a namespace), then push again.');
}

// attempts says what the count is (claims that found the space not
// active), and nothing where there was none: a deployed or failed revision
// reached its cluster, and "0" read as if it never had.
function attempts(r) {
  if (!r.attempts) return h('span', { class: 'muted', 'data-attempts': '0' }, '—');
  return h('span', { 'data-attempts': String(r.attempts), title: 'Claims that found its space not active' }, `${r.attempts} (space not active)`);
}

const REV = { pending: 'unknown', deployed: 'active', failed: 'inactive', stopped: 'inactive', 'dead-lettered': 'inactive' };

// manifestsDisclosure is a revision's manifests behind a <details>: the
// lists leave them out, so GET /revisions/{id} is asked when it is first
// opened, never before (an idle page polls nothing more). seen keeps what
// is open and what was read across the rows' redraws.
function manifestsDisclosure(r, api, seen) {
  const body = h('div', { class: 'manifests-body' });
  const d = h('details', { class: 'manifests', 'data-manifests': r.id, open: seen.open.has(r.id) }, h('summary', null, 'Manifests'), body);
  function show(text) {
    const copy = h('button', { type: 'button', class: 'copy-manifests' }, 'Copy');
    copy.addEventListener('click', async () => {
      try { await navigator.clipboard.writeText(text); flash('Manifests copied.'); } catch { flash('Copying was refused: select the text and copy it.', 'warn'); }
    });
    body.replaceChildren(h('pre', { class: 'manifests-text', tabindex: '0', 'aria-label': `Manifests of revision ${r.id.slice(0, 8)}` }, text), copy);
  }
  async function read() {
    if (seen.text.has(r.id)) { show(seen.text.get(r.id)); return; }
    body.replaceChildren(h('p', { class: 'loading' }, 'Loading the manifests…'));
    try {
      const rev = await api.get(`/revisions/${r.id}`);
      seen.text.set(r.id, JSON.stringify(rev.manifests, null, 2));
      if (d.open) show(seen.text.get(r.id));
    } catch (x) {
      body.replaceChildren(errorBox(x, 'The manifests could not be read'));
    }
  }
  d.addEventListener('toggle', () => {
    if (d.open) { seen.open.add(r.id); if (!body.firstChild || !seen.text.has(r.id)) read(); } else seen.open.delete(r.id);
  });
  if (d.open && seen.text.has(r.id)) show(seen.text.get(r.id));
  return d;
}

// revisionRow is one revision; sp is its space, or null when deregistered,
// then gone is its tombstone if known; seen, when given, adds the
// revision's manifests on demand.
export function revisionRow(r, sp, ctx, load, gone, seen) {
  const act = h('td');
  if (r.state === 'stopped') {
    const ready = sp && sp.status === 'active';
    const why = sp ? `Its space is ${sp.status}: re-enqueue once it is active.` : gone ? ['Its space ', tombstone(gone), ' cannot take it.'] : 'Its space was deregistered.';
    const b = h('button', { type: 'button', disabled: !ready, 'aria-describedby': ready ? null : `why-${r.id}` }, 'Re-enqueue');
    b.addEventListener('click', async () => {
      b.disabled = true;
      try { await ctx.api.post(`/revisions/${r.id}/retry`); flash('Revision re-enqueued.'); await load(); } catch (x) { b.disabled = false; act.append(errorBox(x, 'Not re-enqueued')); }
    });
    act.append(b);
    if (!ready) act.append(h('div', { class: 'muted', id: `why-${r.id}` }, why));
  }
  return h('tr', { 'data-revision': r.id, 'data-state': r.state },
    h('td', { 'data-label': 'Revision' }, h('div', null, h('code', null, r.id.slice(0, 8)), seen ? manifestsDisclosure(r, ctx.api, seen) : null)),
    h('td', { 'data-label': 'State' }, h('span', { class: `badge s-${REV[r.state]}` }, r.state), r.reason ? h('span', { class: 'reason' }, r.reason) : null),
    h('td', { 'data-label': 'Attempts' }, attempts(r)), h('td', { 'data-label': 'Updated' }, when(r.updated_at)), act);
}
