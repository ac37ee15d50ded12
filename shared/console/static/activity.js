// Activity: the org's audit trail (GET /activity), newest first: who did
// what, to which space, when, and the request that did it. The filters are
// the API's (actor, kind, space_id), sent to it, never applied here; more
// entries come with the API's cursor. An idle tab polls the first page
// with its ETag (a 304 draws nothing), and a new entry is put above the
// rows in view, which are never redrawn, so a selection or the focus in
// them stays.
import { h, when, errorBox, empty, field, PATTERNS } from './ui.js';
import { qs } from './api.js';

const PAGE = 50;

// KINDS are the API's kinds (openapi.yaml, ActivityKind), in its order,
// each as the sentence's verb.
export const KINDS = {
  'space.registered': 'registered a space',
  'space.deregistered': 'deregistered a space',
  'space.relabeled': 'relabelled a space',
  'cloud_account.connected': 'connected a cloud account',
  'cloud_account.verified': 'verified a cloud account',
  'revision.pushed': 'pushed a revision',
  'revision.retried': 'retried a revision',
  'provisioning_job.created': 'started a provisioning job',
  'provisioning_job.retried': 'retried a provisioning job',
  'provisioning_job.canceled': 'canceled a provisioning job',
};

// The URL's query names for the filters, and the API's for each.
const FILTERS = { actor: 'actor', kind: 'kind', space: 'space_id' };

function hashParams() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
}

// filterError is what the API would refuse in a filter (listActivity's
// rules), said before any request: '' when the filters can be sent.
function filterError(state) {
  if (state.actor && state.actor.length > 256) return { field: 'actor', reason: 'must be a subject of 1 to 256 characters' };
  if (state.space && !new RegExp(PATTERNS.uuid[0]).test(state.space)) return { field: 'space_id', reason: 'must be a space id (a UUID)' };
  if (state.kind && !KINDS[state.kind]) return { field: 'kind', reason: 'must be one of the kinds listed' };
  return null;
}

export async function activity(root, _, ctx) {
  const { api } = ctx;
  const state = { actor: '', kind: '', space: '' };
  const read = () => { const p = hashParams(); for (const k of Object.keys(FILTERS)) state[k] = (p.get(k) || '').trim(); };
  read();
  const go = change => {
    const next = { ...state, ...change };
    const p = new URLSearchParams();
    for (const k of Object.keys(FILTERS)) if (next[k]) p.set(k, next[k]);
    ctx.go('#/activity' + (p.toString() ? '?' + p : ''));
  };
  // filterLink narrows the trail to one value of a filter (an actor, a
  // space), keeping the others.
  const filterLink = (change, text, title) => h('a', { href: '#/activity?' + new URLSearchParams(Object.entries({ ...state, ...change }).filter(([, v]) => v)), title }, text);

  const actor = h('input', { id: 'a-actor', name: 'actor', type: 'search', maxlength: 256, autocomplete: 'off', spellcheck: 'false', placeholder: 'a user’s subject' });
  const kind = h('select', { id: 'a-kind', name: 'kind' }, h('option', { value: '' }, 'Every kind'),
    Object.entries(KINDS).map(([k, v]) => h('option', { value: k }, `${k} (${v})`)));
  const space = h('input', { id: 'a-space', name: 'space', type: 'search', maxlength: 36, autocomplete: 'off', spellcheck: 'false', placeholder: 'a space id' });
  kind.addEventListener('change', () => go({ kind: kind.value }));
  for (const [el, k] of [[actor, 'actor'], [space, 'space']]) el.addEventListener('change', () => { if (el.value.trim() !== state[k]) go({ [k]: el.value.trim() }); });
  const form = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the activity', onsubmit: e => { e.preventDefault(); go({ actor: actor.value.trim(), space: space.value.trim() }); } },
    field('Actor', actor), field('Kind', kind), field('Space', space));

  const tbody = h('tbody');
  const table = h('table', { class: 'stack', id: 'activity-table' }, h('caption', { class: 'sr' }, 'Activity, newest first'),
    h('thead', null, h('tr', null, ['When', 'Who', 'What', 'Space', 'Request id'].map(t => h('th', { scope: 'col' }, t)))), tbody);
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading the activity…'));
  const error = h('div');
  const more = h('button', { type: 'button', id: 'more' }, 'Load more');
  const pager = h('div', { class: 'pager', hidden: true }, more);
  const count = h('p', { class: 'muted', id: 'activity-count', 'aria-live': 'polite' });
  root.replaceChildren(h('h1', null, 'Activity'),
    h('p', { class: 'muted' }, 'Who registered, deregistered or relabelled a space, connected or verified a cloud account, pushed or retried a revision, started, retried or canceled a provisioning job, and the request that did it. A change appears here a few seconds after it is made; entries are kept 90 days.'),
    form, error, count, body, pager);

  // The entries on screen, for this filter set: their ids (a poll adds only
  // what is not there), the cursor after the last one, and the names of
  // the spaces they name (a revision's entry names its space by id only).
  let shown = new Set(), after = '', gen = 0;
  const names = new Map();

  function renderControls() {
    if (actor.value.trim() !== state.actor && document.activeElement !== actor) actor.value = state.actor;
    if (space.value.trim() !== state.space && document.activeElement !== space) space.value = state.space;
    if (kind.value !== state.kind) kind.value = state.kind;
  }

  function row(a) {
    if (a.resource_type === 'space' && a.resource_name) names.set(a.resource_id, a.resource_name);
    const who = a.actor_type === 'system' ? h('span', { class: 'muted' }, 'Spaces itself')
      : a.actor ? filterLink({ actor: a.actor }, a.actor, `Only the activity of ${a.actor}`) : h('span', { class: 'muted' }, 'a user');
    const what = [h('span', { class: 'kind', 'data-kind': a.kind }, KINDS[a.kind] || a.kind), ' '];
    if (a.resource_type === 'cloud_account') what.push(h('a', { href: '#/connect' }, a.resource_name || a.resource_id), a.status ? h('span', { class: 'reason' }, a.status) : null);
    else if (a.resource_type === 'revision') what.push(a.environment_id ? h('a', { href: `#/environments/${a.environment_id}`, title: a.resource_id }, `revision ${a.resource_id.slice(0, 8)}`) : `revision ${a.resource_id.slice(0, 8)}`);
    else if (a.resource_type === 'provisioning_job') what.push(h('a', { href: '#/jobs' }, a.resource_name || a.resource_id));
    if (a.labels && Object.keys(a.labels).length) {
      what.push(h('span', { class: 'reason', 'data-labels': '' }, Object.entries(a.labels).sort(([x], [y]) => x.localeCompare(y)).map(([k, v]) => `${k}=${v}`).join(', ')));
    }
    const sp = a.space_id ? h('span', null, h('a', { href: `#/spaces/${a.space_id}`, 'data-space-link': a.space_id }, names.get(a.space_id) || a.resource_name && a.resource_type === 'space' && a.resource_name || a.space_id.slice(0, 8)),
      state.space === a.space_id ? null : [' ', h('span', { class: 'reason' }, filterLink({ space: a.space_id }, 'only this', `Only the activity of this space`))]) : h('span', { class: 'muted' }, '—');
    return h('tr', { 'data-activity': a.id, 'data-kind': a.kind },
      h('td', { 'data-label': 'When' }, when(a.at)),
      h('td', { 'data-label': 'Who' }, who),
      h('td', { 'data-label': 'What' }, h('span', null, what)),
      h('td', { 'data-label': 'Space' }, sp),
      h('td', { 'data-label': 'Request id' }, a.request_id ? h('code', { class: 'request-id' }, a.request_id) : h('span', { class: 'muted' }, '—')));
  }

  function renderCount() {
    count.textContent = shown.size ? `${shown.size} entr${shown.size === 1 ? 'y' : 'ies'}${after ? ', more older ones' : ''}` : '';
    pager.hidden = !after;
  }

  // draw puts the first page in place of whatever was shown (a new filter,
  // or a poll that found no entry in common with the rows: a gap).
  function draw(page) {
    shown = new Set(page.items.map(a => a.id));
    after = page.next_cursor || '';
    error.replaceChildren();
    if (!page.items.length) {
      tbody.replaceChildren();
      const filtered = Object.keys(FILTERS).some(k => state[k]);
      body.replaceChildren(filtered ? empty('No activity matches these filters.', h('a', { href: '#/activity' }, 'Clear the filters'))
        : empty('No activity yet: what anyone of the org changes appears here a few seconds later.'));
    } else {
      tbody.replaceChildren(...page.items.map(row));
      if (body.firstChild !== table) body.replaceChildren(table);
    }
    renderCount();
  }

  // add puts the entries of a newer first page that are not on screen in
  // their place, leaving the rows alone: above them, or just above the
  // shown entry that follows them on the page (two recordings that raced
  // may land in that order); false when the page shares no entry with the
  // rows (more changed than a page holds).
  function add(page) {
    const fresh = page.items.filter(a => !shown.has(a.id));
    if (fresh.length === page.items.length && shown.size) return false;
    if (!fresh.length) return true;
    if (body.firstChild !== table) body.replaceChildren(table);
    let before = [];
    for (const a of page.items) {
      if (!shown.has(a.id)) { before.push(a); continue; }
      if (before.length) {
        const at = tbody.querySelector(`tr[data-activity="${CSS.escape(a.id)}"]`);
        if (at) at.before(...before.map(row)); else tbody.prepend(...before.map(row));
        before = [];
      }
    }
    // Fresh entries below the page's last shown one: on the next pages,
    // above the rows loaded from them.
    if (before.length) {
      const last = page.items.filter(a => shown.has(a.id)).pop();
      const at = last && tbody.querySelector(`tr[data-activity="${CSS.escape(last.id)}"]`);
      if (at) at.after(...before.map(row)); else tbody.append(...before.map(row));
    }
    for (const a of fresh) shown.add(a.id);
    renderCount();
    return true;
  }

  const firstPath = () => '/activity' + qs({ actor: state.actor, kind: state.kind, space_id: state.space, limit: String(PAGE) });
  let drawnFor = null; // the filters the rows are for

  // load asks for the first page with its ETag: a 304 (nothing new) draws
  // nothing; new entries go above the rows.
  async function load() {
    const mine = gen, path = firstPath();
    const bad = filterError(state);
    if (bad) {
      drawnFor = path; shown = new Set(); after = '';
      tbody.replaceChildren(); body.replaceChildren(); renderCount();
      error.replaceChildren(errorBox({ status: 400, problem: { title: 'The filter is not valid', errors: [bad] } }, 'The filter is not valid'));
      return;
    }
    const r = await api.poll(path);
    if (mine !== gen) return;
    if (drawnFor !== path) { drawnFor = path; draw(r.data); return; }
    if (r.changed && !add(r.data)) draw(r.data);
    error.replaceChildren();
  }

  more.addEventListener('click', async () => {
    const mine = gen;
    more.disabled = true;
    try {
      const page = await api.get('/activity' + qs({ actor: state.actor, kind: state.kind, space_id: state.space, limit: String(PAGE), cursor: after }));
      if (mine !== gen) return;
      const fresh = page.items.filter(a => !shown.has(a.id));
      for (const a of fresh) shown.add(a.id);
      tbody.append(...fresh.map(row));
      after = page.next_cursor || '';
      renderCount();
    } catch (x) {
      if (mine === gen) error.replaceChildren(errorBox(x, 'More activity could not be loaded'));
    } finally {
      more.disabled = false;
    }
  });

  // A new URL of this screen (a filter changed): the rows are read again,
  // the controls stay.
  ctx.onHash(() => {
    read();
    renderControls();
    if (firstPath() === drawnFor) return;
    gen++;
    body.setAttribute('aria-busy', 'true');
    load().catch(x => error.replaceChildren(errorBox(x, 'The activity could not be loaded'))).finally(() => body.removeAttribute('aria-busy'));
  });
  renderControls();

  await ctx.every(async () => {
    try { await load(); } catch (x) { error.replaceChildren(errorBox(x, 'The activity could not be loaded')); }
  });
}
