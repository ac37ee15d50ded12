// Spaces: the fleet list (counts, filters, cursor paging, polling with
// ETags) and one space's detail (identity, probe, history chart,
// namespaces, bindings, deregistration).
import { h, badge, providerMark, when, probedWhen, stamp, region, refreshAges, errorBox, field, empty, flash, showFieldErrors, validate, patterned, tombstoneOf, PATTERNS, PROVIDERS, bootstraps } from './ui.js';
import { qs } from './api.js';
import { bulkWork } from './bulk.js';
import { RANGES, segments, chart } from './chart.js';
import { inventory, versionCell, supportCell, factBadges, certificateText, nodesText } from './inventory.js';

const PAGE = 50;

function hashParams() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
}

// trails keeps, per filter set, the cursors of the pages visited in order,
// so Previous works after Next; the URL carries only the page number and
// its cursor, so a reload or Back lands on the same page.
const trails = new Map();

// The URL's query names for the view's state; labels is the label
// selector (label_selector); the inventory's filters keep the API's names.
const STATE = ['q', 'provider', 'status', 'account', 'sort', 'labels', 'synthetic', 'version', 'support_ends_within_days', 'certificate_expires_within_days'];
// INVENTORY are the inventory's filters, which its tiles and bars set.
const INVENTORY = ['version', 'support_ends_within_days', 'certificate_expires_within_days'];

// SORTS are the orders the API offers (openapi.yaml, SpaceSort), each
// offered by a column header; '' is the default, the API's problems first
// (sort=problems, which has no reverse).
const SORTS = ['', 'name', '-name', 'registered', '-registered', 'status', '-status', 'status_since', '-status_since'];

// SEGMENTS are the statuses problems first puts in order.
const SEGMENTS = ['inactive', 'unknown', 'active'];

// since is when a space's status last changed (its probe's
// last_transition_at), else its registration.
const since = sp => (sp.probe && sp.probe.last_transition_at) || sp.created_at;

// sinceText says since when a space has its status. A status read as
// unknown because no probe is recent (ProbeStale) has no recorded start:
// the API computes it at each read, and last_transition_at is still the
// stored status's. So it says what the prober did record, its last probe
// (to the API's precision), never the stored status's time.
function sinceText(sp) {
  const p = sp.probe || {};
  if (p.reason === 'ProbeStale') return ['no probe result since ', p.last_probe_at ? probedWhen(p.last_probe_at) : ['its registration ', when(sp.created_at)]];
  return ['since ', when(since(sp))];
}

// selectorError checks a label selector the way the API parses it
// (space.ParseSelector): '' when it is well formed, else what is wrong,
// in the server's words, so a malformed one is explained before any
// request and the rows of another filter are never shown under it.
export function selectorError(text) {
  if (text.length > 1024) return 'must be at most 1024 characters';
  const key = k => {
    const i = k.indexOf('/');
    const ok = i < 0 ? labelName(k) : dnsSub(k.slice(0, i)) && labelName(k.slice(i + 1));
    return ok ? '' : `names ${quoteShort(k)}, which ${KEY_HINT}`;
  };
  const value = v => v === '' || labelName(v) ? '' : `compares with ${quoteShort(v)}, which ${VALUE_HINT}`;
  const parts = [];
  let depth = 0, start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(' && ++depth > 1) return 'must not nest parentheses';
    if (c === ')' && --depth < 0) return "has a ')' without its '('";
    if (c === ',' && depth === 0) { parts.push(text.slice(start, i)); start = i + 1; }
  }
  if (depth !== 0) return "has a '(' without its ')'";
  parts.push(text.slice(start));
  for (const raw of parts) {
    const s = raw.trim();
    if (!s) return "has an empty requirement (a stray ',' or nothing at all)";
    if (s.startsWith('!')) { const m = key(s.slice(1).trim()); if (m) return m; continue; }
    const op = ['!=', '==', '='].find(o => s.includes(o));
    if (op) {
      const i = s.indexOf(op);
      const m = key(s.slice(0, i).trim()) || value(s.slice(i + op.length).trim());
      if (m) return m;
      continue;
    }
    const end = s.search(/[ \t(]/);
    if (end < 0) { const m = key(s); if (m) return m; continue; }
    const k = s.slice(0, end);
    let rest = s.slice(end).trim();
    const km = key(k);
    if (km) return km;
    if (rest.startsWith('in') && rest.slice(2).trim().startsWith('(')) rest = rest.slice(2).trim();
    else if (rest.startsWith('notin') && rest.slice(5).trim().startsWith('(')) rest = rest.slice(5).trim();
    else return `has ${quoteShort(s)}: expected k=v, k!=v, k, !k, k in (a,b) or k notin (a,b)`;
    if (!rest.endsWith(')')) return `has text after the ')' of ${quoteShort(k)}`;
    const inner = rest.slice(1, -1);
    for (const v of inner.split(',')) { const m = value(v.trim()); if (m) return m; }
    if (!inner.trim()) return `has an empty set of values for ${quoteShort(k)}`;
  }
  return '';
}
const labelName = v => v.length <= 63 && /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(v);
const dnsSub = v => v.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(v);
const quoteShort = v => `"${new TextEncoder().encode(v).length > 64 ? v.slice(0, 64) + '…' : v}"`;
const KEY_HINT = "must be a Kubernetes label key: an optional DNS subdomain prefix (at most 253 lowercase letters, digits, '-' and '.') and '/', then 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";
const VALUE_HINT = "must be a Kubernetes label value: empty, or 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit";

// clusters splits the counts: the clusters by status (the counts less the
// synthetic ones), and the synthetic ones.
function clusters(counts) {
  const syn = counts.synthetic || { total: 0, by_status: {} };
  const by_status = {}, syntheticBy = {};
  for (const k of SEGMENTS) { syntheticBy[k] = syn.by_status[k] || 0; by_status[k] = (counts.by_status[k] || 0) - syntheticBy[k]; }
  return { by_status, synthetic: syn.total || 0, syntheticBy };
}

// labelChips shows a space's labels as small chips; with link, each one
// filters the list by itself.
function labelChips(labels, link) {
  const entries = Object.entries(labels || {}).sort(([a], [b]) => a.localeCompare(b));
  if (!entries.length) return null;
  return h('ul', { class: 'chips', 'aria-label': 'Labels' }, entries.map(([k, v]) => {
    const text = `${k}=${v}`;
    return h('li', { class: 'chip', 'data-label-key': k }, link
      ? h('a', { href: '#/spaces?' + new URLSearchParams({ labels: text }), title: `Only the spaces labelled ${text}` }, text) : text);
  }));
}

// parseLabels reads "k=v, k2=v2" as labels, checked against the OpenAPI
// patterns (PATTERNS.labelKey/labelValue: the Kubernetes rule).
export function parseLabels(text, field = 'labels') {
  const labels = {};
  const bad = [];
  for (const part of text.split(',').map(x => x.trim()).filter(Boolean)) {
    const [k, ...v] = part.split('=');
    const key = k.trim();
    labels[key] = v.join('=').trim();
    if (!new RegExp(PATTERNS.labelKey[0]).test(key) || key.length > 317) bad.push({ field, reason: `${key}: ${PATTERNS.labelKey[1]}` });
    else if (!new RegExp(PATTERNS.labelValue[0]).test(labels[key])) bad.push({ field, reason: `${key}: ${PATTERNS.labelValue[1]}` });
  }
  return { labels, bad };
}

export async function spacesList(root, _, ctx) {
  const { api } = ctx;
  // The view's state comes from the URL (read): a change of filter, search,
  // order or page sets the URL, and the view then updates in place (the
  // router hands it the new URL: onHash), keeping its controls, its counts
  // and its accounts; only the rows are asked again.
  const state = {};
  let pageNo = 1, cursor = '', trail = [''], filter = {}, badSelector = '';
  // The selected spaces (id -> the space as listed), for bulk work: kept
  // across pages and orders, cleared when the filter changes (it may have
  // been "all matching" the filter left).
  const selected = new Map();
  let selectedFor = null, bulk = null;
  function read() {
    const params = hashParams();
    for (const k of STATE) state[k] = params.get(k) || '';
    if (!['', 'true', 'false'].includes(state.synthetic)) state.synthetic = '';
    if (!SORTS.includes(state.sort)) state.sort = '';
    // A value the API would refuse is left out, as a bad sort is.
    if (!/^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$/.test(state.version)) state.version = '';
    for (const k of INVENTORY.slice(1)) if (!/^[0-9]{1,4}$/.test(state[k]) || Number(state[k]) > 3650) state[k] = '';
    pageNo = Math.max(1, parseInt(params.get('page') || '1', 10) || 1);
    cursor = pageNo > 1 ? (params.get('cursor') || '') : '';
    const trailKey = STATE.map(k => state[k]).join('\u0000');
    trail = trails.get(trailKey) || [''];
    trails.set(trailKey, trail);
    if (pageNo > 1 && cursor) trail[pageNo - 1] = cursor;
    // A search (by word prefix) lists in its own order, which no sort
    // joins; text without a letter or digit searches for nothing.
    const q = /[\p{L}\p{N}]/u.test(state.q) ? state.q : '';
    filter = { provider: state.provider, status: state.status, cloud_account_id: state.account, name_contains: q, sort: q ? '' : (state.sort || 'problems'), label_selector: state.labels, synthetic: state.synthetic,
      version: state.version, support_ends_within_days: state.support_ends_within_days, certificate_expires_within_days: state.certificate_expires_within_days };
    // A malformed selector is never sent: the view says what is wrong.
    badSelector = state.labels ? selectorError(state.labels) : '';
    const sig = JSON.stringify({ ...filter, sort: '' });
    if (selectedFor !== null && sig !== selectedFor) { selected.clear(); if (bulk) bulk.reset(); }
    selectedFor = sig;
  }
  read();
  let page = null;               // the page in view
  let shown = '';                // the path it was read from
  let drawn = { ...state, pageNo }; // the state it shows
  let counts = null;             // GET /space-counts
  let ticks = 0;

  // go changes the view's state in the URL (page 1 unless given). Typing
  // in the search box replaces the entry its previous keystroke made, so
  // Back leaves the search rather than walking back through its letters.
  let typed = '';                // the URL the search box set last
  const go = (change, to = {}) => {
    const next = { ...state, ...change };
    const p = new URLSearchParams();
    for (const k of STATE) if (next[k]) p.set(k, next[k]);
    if (to.page > 1) { p.set('page', String(to.page)); p.set('cursor', to.cursor); }
    const hash = '#/spaces' + (p.toString() ? '?' + p : '');
    if (to.typing && typed === location.hash) location.replace(hash); else ctx.go(hash);
    typed = to.typing ? hash : '';
    apply(); // at once: the hashchange that follows finds it done
  };

  const countsEl = h('ul', { class: 'counts', 'aria-label': 'Spaces per status (whole org)' });
  const inventoryEl = h('section', { class: 'inventory', id: 'inventory', 'aria-label': 'Inventory' });
  const tbody = h('tbody');
  // Each order the API offers is a column header: a click sorts by it,
  // again the other way, a third time back to problems first.
  // A header may offer a second order (also: [key, label, what]).
  const heads = {};
  const sortHead = (key, label, what, also) => {
    const th = h('th', { scope: 'col' });
    for (const [k, l, w] of [[key, label, what], ...(also ? [also] : [])]) {
      const b = h('button', { type: 'button', class: 'sort', id: `sort-${k}`, title: `Sort by ${w}` }, l, h('span', { 'aria-hidden': 'true' }));
      b.addEventListener('click', () => go({ sort: state.sort === k ? '-' + k : state.sort === '-' + k ? '' : k }));
      heads[k] = { th, b };
      th.append(b, ' ');
    }
    return th;
  };
  const plain = t => h('th', { scope: 'col' }, t);
  // The page's checkbox selects (or unselects) the rows on screen.
  const pageCheck = h('input', { type: 'checkbox', id: 'select-page', 'aria-label': 'Select the spaces on this page' });
  pageCheck.addEventListener('change', () => {
    for (const sp of page ? page.items : []) if (pageCheck.checked) selected.set(sp.id, sp); else selected.delete(sp.id);
    syncChecks();
  });
  const table = h('table', { class: 'stack', id: 'spaces-table' },
    h('caption', { class: 'sr' }, 'Registered spaces'),
    h('thead', null, h('tr', null, h('th', { scope: 'col', class: 'check' }, pageCheck), sortHead('name', 'Name', 'name'), plain('Provider'), plain('Region'), sortHead('status', 'Status', 'status', ['status_since', 'since', 'when each took its status']),
      plain('Last probed'), sortHead('registered', 'Registered', 'registration'), plain('Kubernetes'), plain('Support ends'))), tbody);
  const order = h('p', { class: 'muted', id: 'order' });
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading spaces…'));
  const pager = h('div', { class: 'pager' });
  const range = h('p', { class: 'muted', id: 'range', 'aria-live': 'polite' });
  const updated = h('p', { class: 'muted', id: 'updated' });
  const error = h('div');
  bulk = bulkWork(ctx, selected, {
    total: () => total(),
    path: () => '/spaces' + qs({ ...filter, sort: '' }),
    changed: () => syncChecks(),
    // The spaces changed: the page and the counts are read again at once.
    done: () => { shown = ''; loadPage().catch(() => {}); loadCounts().catch(() => {}); },
  });
  // syncChecks shows the selection on the rows' checkboxes and the bar.
  function syncChecks() {
    const rows = page ? page.items : [];
    for (const box of tbody.querySelectorAll('input[data-select]')) box.checked = selected.has(box.dataset.select);
    const n = rows.filter(sp => selected.has(sp.id)).length;
    pageCheck.checked = rows.length > 0 && n === rows.length;
    pageCheck.indeterminate = n > 0 && n < rows.length;
    bulk.update();
  }

  const selects = {};
  const sel = (id, key, label, options) => {
    const el = h('select', { id, name: id }, options.map(([v, t]) => h('option', { value: v, selected: v === state[key] }, t)));
    el.addEventListener('change', () => go({ [key]: el.value }));
    selects[key] = el;
    return field(label, el);
  };
  const provField = sel('f-provider', 'provider', 'Provider', [['', 'All providers'], ...Object.entries(PROVIDERS)]);
  const statField = sel('f-status', 'status', 'Status', [['', 'All statuses'], ['active', 'active'], ['inactive', 'inactive'], ['unknown', 'unknown']]);
  const acctField = sel('f-account', 'account', 'Cloud account', [['', 'All accounts']]);
  // Synthetic spaces are placeholders with no cluster: apart on request.
  const kindField = sel('f-kind', 'synthetic', 'Kind', [['', 'All spaces'], ['false', 'Clusters'], ['true', 'Synthetic placeholders']]);
  const acctSel = acctField.querySelector('select');
  // The accounts' names, for their filter, are asked once the first page
  // is on screen: the page's own requests come first.
  const loadAccounts = () => api.all('/cloud-accounts').then(accts => {
    for (const a of accts) {
      acctSel.append(h('option', { value: a.id, selected: a.id === state.account }, `${a.name} (${PROVIDERS[a.provider]})`));
    }
  }).catch(() => {});

  // The search box searches as the user types: a change goes to the URL
  // and the rows follow (loadPage) 40 ms after the last keystroke, so a
  // burst of keys (fast typing, a paste) costs one URL change and one
  // request, while a person's pause between keys is long enough to ask.
  const search = h('input', { id: 'f-q', name: 'q', type: 'search', value: state.q, maxlength: 100, autocomplete: 'off', placeholder: 'part of a name' });
  let typing = 0;                // the pause timer, while keys are pending
  search.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => { typing = 0; const q = search.value.trim(); if (q !== state.q) go({ q }, { typing: true }); }, 40);
  });
  ctx.onLeave(() => clearTimeout(typing));
  // The label selector applies on Enter or when the field is left: a
  // selector half typed is malformed.
  const selector = h('input', { id: 'f-labels', name: 'labels', type: 'search', value: state.labels, maxlength: 1024, autocomplete: 'off', spellcheck: 'false',
    placeholder: 'env=prod, tier in (gold,silver)', 'aria-describedby': 'f-labels-hint' });
  selector.addEventListener('change', () => { if (selector.value.trim() !== state.labels) go({ labels: selector.value.trim() }); });
  const selectorField = field('Labels', selector);
  selectorField.append(h('span', { class: 'muted', id: 'f-labels-hint' }, 'Kubernetes selector: k=v, k!=v, k, !k, k in (a,b)'));

  // Saved views: a name for the search, filters and order of the URL,
  // kept in this browser per org and user (localStorage); choosing one
  // goes to its URL, which a link can share as well.
  const viewsKey = `spaces.views.${ctx.session.org()}.${ctx.session.user()}`;
  const readViews = () => { try { return JSON.parse(localStorage.getItem(viewsKey) || '{}'); } catch { return {}; } };
  const viewPick = h('select', { id: 'view-pick', 'aria-label': 'Saved views' });
  const viewName = h('input', { id: 'view-name', maxlength: 60, autocomplete: 'off', placeholder: 'name this view', 'aria-label': 'Name of the view to save' });
  const drawViews = () => {
    const views = readViews();
    viewPick.replaceChildren(h('option', { value: '' }, Object.keys(views).length ? 'Saved views…' : 'No saved view'),
      ...Object.keys(views).sort().map(n => h('option', { value: n }, n)));
  };
  viewPick.addEventListener('change', () => { const q = readViews()[viewPick.value]; if (q !== undefined) ctx.go('#/spaces' + q); });
  const viewsForm = h('form', { class: 'row views', id: 'views', 'aria-label': 'Saved views' }, viewPick, viewName, h('button', { type: 'submit' }, 'Save this view'));
  viewsForm.addEventListener('submit', e => {
    e.preventDefault();
    const n = viewName.value.trim();
    if (!n) { viewName.focus(); return; }
    const i = location.hash.indexOf('?');
    const p = new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
    p.delete('page'); p.delete('cursor'); // a view is its filters and order, from its first page
    localStorage.setItem(viewsKey, JSON.stringify({ ...readViews(), [n]: p.toString() ? '?' + p : '' }));
    viewName.value = '';
    drawViews();
    flash(`View ${n} saved.`);
  });
  drawViews();

  root.replaceChildren(
    h('h1', null, 'Spaces', h('span', { class: 'spacer' }), h('a', { class: 'button primary', href: '#/connect' }, 'Register a cluster')),
    countsEl, inventoryEl, viewsForm,
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter spaces', onsubmit: e => { e.preventDefault(); clearTimeout(typing); typing = 0; go({ q: search.value.trim(), labels: selector.value.trim() }); } },
      field('Name', search), provField, statField, acctField, kindField, selectorField),
    error, order, range, bulk.el, body, pager, updated);
  if (state.q && document.activeElement === document.body) { search.focus(); search.setSelectionRange(search.value.length, search.value.length); }

  // problemsFirst: the default order (no order chosen, no search).
  const problemsFirst = () => filter.sort === 'problems';
  const pagePath = () => '/spaces' + qs({ ...filter, limit: String(PAGE), cursor });
  // Problems first is the API's order (sort=problems); without a Kind
  // filter the synthetic placeholders come apart, after every cluster: a
  // second segment. The page's cursor is "<segment>:<the API's cursor>".
  const segments = () => filter.synthetic ? [{}] : [{ synthetic: 'false' }, { synthetic: 'true' }];
  function segmentPath(seg, cur, n) {
    return '/spaces' + qs({ ...filter, ...segments()[seg], limit: String(n), cursor: cur });
  }
  // readProblemsFirst fills a page from the segments in turn, from the
  // page's cursor on; parts are the requests it took, which the ticks
  // poll one at a time.
  async function readProblemsFirst(signal) {
    const m = /^(\d+):(.*)$/.exec(cursor || '');
    let seg = m ? Number(m[1]) : 0, cur = m ? m[2] : '';
    const items = [], parts = [];
    let changed = false;
    while (seg < segments().length && items.length < PAGE) {
      const path = segmentPath(seg, cur, PAGE - items.length);
      const r = await api.poll(path, { signal });
      parts.push(path);
      changed = changed || r.changed;
      items.push(...r.data.items);
      if (r.data.next_cursor) cur = r.data.next_cursor;
      else { seg++; cur = ''; }
      if (r.data.next_cursor && items.length >= PAGE) break;
    }
    return { changed, parts, data: { items, next_cursor: seg < segments().length ? `${seg}:${cur}` : undefined } };
  }
  let parts = [], part = 0;      // the requests of the page in view, polled in turn

  // renderControls shows the state on the controls; one that shows it
  // already (the box being typed in) is left alone.
  function renderControls() {
    for (const [k, el] of Object.entries(selects)) if (el.value !== state[k]) el.value = state[k];
    // Keys typed since the state was set are ahead of it: never undone.
    if (!typing && search.value.trim() !== state.q) search.value = state.q;
    if (selector.value.trim() !== state.labels) selector.value = state.labels;
    if (badSelector) selector.setAttribute('aria-invalid', 'true'); else selector.removeAttribute('aria-invalid');
    for (const { th } of Object.values(heads)) th.setAttribute('aria-sort', 'none');
    for (const [k, { th, b }] of Object.entries(heads)) {
      if (state.sort === k || state.sort === '-' + k) th.setAttribute('aria-sort', state.sort === k ? 'ascending' : 'descending');
      b.querySelector('span').textContent = state.sort === k ? ' ▲' : state.sort === '-' + k ? ' ▼' : ' ↕';
    }
    order.textContent = problemsFirst() ? `Problems first: inactive, then unknown, then active; within each, the newest status change first${filter.synthetic ? '' : '; the synthetic placeholders after the clusters'}.`
      : filter.name_contains ? 'In the search\'s order: by the word matched, then name.' : '';
  }
  renderControls();

  // The tiles: every space, the clusters by status, and the synthetic
  // placeholders apart (they are never probed: counted among the
  // clusters they would fill the unknown tile). Each filters the list by
  // what it counts; the tile in force clears its filter.
  function renderCounts() {
    const c = counts ? clusters(counts) : null;
    const tile = (key, n, label, to, current) => h('li', { 'data-count': key },
      h('a', { href: '#', 'aria-current': current ? 'true' : null,
        onclick: e => { e.preventDefault(); go(current ? { status: '', synthetic: '' } : to); } },
      h('b', null, c ? String(n) : '…'), label));
    const none = Object.fromEntries(INVENTORY.map(k => [k, '']));
    countsEl.replaceChildren(tile('total', c && counts.total, 'spaces', { status: '', synthetic: '', ...none }, !drawn.status && !drawn.synthetic && INVENTORY.every(k => !drawn[k])),
      ...['active', 'inactive', 'unknown'].map(k => tile(k, c && c.by_status[k], h('span', { class: `badge s-${k}` }, k),
        { status: k, synthetic: 'false' }, drawn.status === k && drawn.synthetic === 'false')),
      tile('synthetic', c && c.synthetic, h('span', { class: 'badge s-synthetic' }, 'synthetic'), { status: '', synthetic: 'true' }, !drawn.status && drawn.synthetic === 'true'));
    inventoryEl.replaceChildren(...inventory(counts, drawn, go));
  }

  // total is how many spaces the list holds, where the counts say it: no
  // filter, or exactly one of status, provider and account, or the kind
  // with or without a status.
  function total() {
    if (!counts || drawn.q || drawn.labels || drawn.support_ends_within_days || drawn.certificate_expires_within_days) return null;
    if (drawn.version) return drawn.status || drawn.synthetic || drawn.provider || drawn.account ? null : (counts.by_version || {})[drawn.version] || 0;
    if (drawn.synthetic) {
      if (drawn.provider || drawn.account) return null;
      const c = clusters(counts), syn = drawn.synthetic === 'true';
      if (!drawn.status) return syn ? c.synthetic : counts.total - c.synthetic;
      return syn ? c.syntheticBy[drawn.status] || 0 : c.by_status[drawn.status] || 0;
    }
    const set = [['status', 'by_status'], ['provider', 'by_provider'], ['account', 'by_account']].filter(([k]) => drawn[k]);
    if (!set.length) return counts.total;
    if (set.length > 1) return null;
    const [k, by] = set[0];
    return (counts[by] || {})[drawn[k]] || 0;
  }

  // The range, the tiles and the controls tell the rows on screen: they
  // change with them (renderRows), not before.
  function renderRange() {
    const first = (drawn.pageNo - 1) * PAGE + 1, n = page ? page.items.length : 0;
    const t = total();
    range.textContent = !page || !n ? '' : `${first}–${first + n - 1}` + (t === null ? '' : ` of ${t}`);
    bulk.update();
  }

  function renderRows() {
    drawn = { ...state, pageNo };
    body.removeAttribute('aria-busy');
    renderControls();
    renderCounts();
    if (!page.items.length) {
      const filtered = STATE.some(k => k !== 'sort' && state[k]);
      tbody.replaceChildren();
      body.replaceChildren(filtered
        ? empty('No space matches these filters.', h('a', { href: '#/spaces' }, 'Clear the filters'))
        : pageNo > 1 ? empty('This page is empty now.', h('a', { href: '#/spaces' }, 'First page'))
        : empty('No space is registered yet. Connect a cloud account, pick one of its clusters, and register it.', h('a', { class: 'button primary', href: '#/connect' }, 'Connect a cloud account')));
    } else {
      tbody.replaceChildren(...page.items.map(sp => h('tr', { 'data-space': sp.id, 'data-name': sp.name },
        h('td', { 'data-label': 'Select', class: 'check' }, check(sp)),
        h('td', { 'data-label': 'Name' }, h('a', { href: `#/spaces/${sp.id}` }, sp.name), sp.synthetic ? h('span', { class: 'reason' }, 'synthetic') : null, factBadges(sp), labelChips(sp.labels, true)),
        h('td', { 'data-label': 'Provider' }, providerMark(sp.provider)),
        h('td', { 'data-label': 'Region' }, region(sp)),
        h('td', { 'data-label': 'Status' }, badge(sp.status, sp.probe && sp.probe.reason, sp.connectivity), h('span', { class: 'reason', 'data-since': '' }, sinceText(sp))),
        h('td', { 'data-label': 'Last probed' }, probedWhen(sp.probe && sp.probe.last_probe_at)),
        h('td', { 'data-label': 'Registered' }, when(sp.created_at)),
        h('td', { 'data-label': 'Kubernetes' }, versionCell(sp)),
        h('td', { 'data-label': 'Support ends' }, supportCell(sp)))));
      if (body.firstChild !== table) body.replaceChildren(table);
    }
    syncChecks();
    const n = pageNo, prevCursor = trail[n - 2], nextCursor = page.next_cursor, tr = trail;
    const prev = n === 1 ? h('button', { type: 'button', disabled: true }, '← Previous')
      : prevCursor !== undefined ? h('a', { class: 'button', id: 'prev', href: '#', onclick: e => { e.preventDefault(); go({}, { page: n - 1, cursor: prevCursor }); } }, '← Previous')
      : h('a', { class: 'button', id: 'prev', href: '#', onclick: e => { e.preventDefault(); go({}); } }, '← First page');
    const next = h('button', { type: 'button', id: 'next', disabled: !nextCursor }, 'Next →');
    next.addEventListener('click', () => { tr[n] = nextCursor; go({}, { page: n + 1, cursor: nextCursor }); });
    pager.replaceChildren(prev, h('span', null, `Page ${n}`), next);
    pager.hidden = n === 1 && !nextCursor;
    renderRange();
  }

  // check is a row's checkbox; a selected row's space is kept as read
  // last (its labels and version, which bulk work starts from).
  function check(sp) {
    if (selected.has(sp.id)) selected.set(sp.id, sp);
    const box = h('input', { type: 'checkbox', 'data-select': sp.id, 'aria-label': `Select ${sp.name}`, checked: selected.has(sp.id) });
    box.addEventListener('change', () => { if (box.checked) selected.set(sp.id, sp); else selected.delete(sp.id); syncChecks(); });
    return box;
  }

  // showBadSelector says what is wrong with the selector, with no rows:
  // the rows of another filter would read as its answer.
  function showBadSelector() {
    drawn = { ...state, pageNo };
    page = null; shown = ''; parts = [];
    renderControls();
    renderCounts();
    body.removeAttribute('aria-busy');
    tbody.replaceChildren();
    body.replaceChildren();
    pager.hidden = true;
    range.textContent = '';
    error.replaceChildren(errorBox({ status: 400, problem: { title: 'The label selector is not valid', errors: [{ field: 'label_selector', reason: badSelector }] } },
      'The label selector is not valid'));
  }

  function showError(x) {
    renderControls();
    body.removeAttribute('aria-busy');
    error.replaceChildren(errorBox(x, x.status === 400 && state.labels ? 'The label selector is not valid' : 'The spaces could not be loaded'));
  }

  // loadPage asks for the page the state names, with its ETag. A change
  // of state (a keystroke) aborts the request out for the state left and
  // asks for the new one at once, so the rows follow the box with no pause
  // to wait for; an answer for a state already left is never drawn, and
  // the rows in view stay until the new ones replace them.
  let out = null;                // {path, abort, done} of the request out
  function loadPage() {
    const path = pagePath();
    if (out && out.path === path) return out.done;
    if (out) out.abort.abort();
    if (badSelector) { out = null; showBadSelector(); return Promise.resolve(); }
    const mine = out = { path, abort: new AbortController() };
    mine.done = (async () => {
      try {
        const signal = mine.abort.signal;
        let r;
        if (!problemsFirst()) r = await api.poll(path, { signal });
        else if (shown === path && parts.length) {
          // The page in view, polled: one of its requests a tick; a
          // change reads it whole again (the others mostly 304s).
          const one = await api.poll(parts[part++ % parts.length], { signal });
          r = one.changed ? { ...(await readProblemsFirst(signal)), changed: true } : { changed: false };
        } else r = await readProblemsFirst(signal);
        if (out !== mine) return;
        if (r.parts) { parts = r.parts; part = 0; }
        error.replaceChildren();
        if (r.changed || shown !== path) { page = r.data; shown = path; renderRows(); }
        else refreshAges(root); // ages move on
      } catch (x) {
        if (out !== mine) return; // aborted: the state moved on
        showError(x);
        throw x;
      } finally {
        if (out === mine) out = null;
      }
    })();
    return mine.done;
  }
  ctx.onLeave(() => { const o = out; out = null; if (o) o.abort.abort(); });

  async function loadCounts() {
    const r = await api.poll('/space-counts');
    if (r.changed || !counts) { counts = r.data; renderCounts(); renderRange(); }
  }

  // The router hands the view a new URL of the list: the state changes in
  // place, and only the rows are asked again (the counts are the org's,
  // whatever the filters).
  let applied = location.hash;   // the URL the view shows
  function apply() {
    if (location.hash === applied) return;
    applied = location.hash;
    read();
    if (pagePath() !== shown) body.setAttribute('aria-busy', 'true');
    loadPage().catch(() => {});
  }
  ctx.onHash(() => {
    if (location.hash !== typed) typed = '';
    apply();
  });

  // A tick polls one thing, the page and the counts in turn, each with its
  // ETag: an idle tab sends one request a tick, and most answer 304. The
  // first tick asks both at once.
  async function refresh() {
    try {
      if (!page || !counts) await Promise.all([page ? null : loadPage(), counts ? null : loadCounts()]);
      else if (ticks % 2 === 0) await loadPage();
      else await loadCounts();
      if (!ticks) loadAccounts();
      if (!badSelector) error.replaceChildren();
      ticks++;
      updated.dataset.ticks = String(ticks);
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every ${ctx.cfg.refresh_seconds || 5} s`;
    } catch (x) {
      showError(x);
    }
  }
  renderCounts();
  await ctx.every(refresh);
}

// ---- detail ----------------------------------------------------------------

export async function spaceDetail(root, [id], ctx) {
  const { api } = ctx;
  let sp;
  // Read with its ETag: the ticks then ask with If-None-Match, and an
  // unchanged space (a 304) redraws nothing.
  try { sp = (await api.poll(`/spaces/${id}`)).data; } catch (x) {
    const ts = tombstoneOf(x);
    if (!ts) throw x;
    // Deregistered: its name, and when and by whom, instead of a bare 404.
    root.replaceChildren(h('p', null, h('a', { href: '#/spaces' }, '← Spaces')), h('h1', null, providerMark(ts.provider, false), ts.name),
      h('div', { class: 'alert warn', role: 'status', id: 'tombstone' }, 'This space was deregistered ', when(ts.deregistered_at),
        ts.deregistered_by ? [' by ', h('span', { class: 'actor' }, ts.deregistered_by)] : null,
        '. Its environments stay gated until re-bound; registering the cluster again makes a new space.'));
    return;
  }
  let range = '24h';
  const head = h('div');
  const identity = h('div', { class: 'card', id: 'identity' });
  const probe = h('div', { class: 'card', id: 'probe' });
  const history = h('div', { class: 'card', id: 'history' });
  const namespaces = h('div', { class: 'card', id: 'namespaces' });
  const labelsCard = h('div', { class: 'card', id: 'labels' });
  const bindings = h('div', { class: 'card', id: 'bindings' });
  const agent = h('section', { class: 'card', id: 'agent', 'aria-labelledby': 'agent-title', hidden: true });
  const error = h('div');
  root.replaceChildren(head, error, agent, h('div', { class: 'grid' }, identity, probe), labelsCard, history, h('div', { class: 'grid' }, namespaces, bindings));

  let envs = [], policies = [];
  let accountName = '';          // the account's name, once read
  let historyOpen = false;       // the change list stays as the user left it
  let nsFailed = false;          // the namespaces are asked again at the next tick
  let nsWaiting = false;         // an agent space whose agent has not reported them yet
  let identitySig = '';          // the identity card as drawn
  const deregBtn = h('button', { class: 'danger', type: 'button', id: 'deregister' }, 'Deregister…');
  deregBtn.addEventListener('click', () => confirmDeregister(sp, envs, policies, ctx));

  // The heading is built once (its button must stay the same element
  // while the page refreshes); only the badge and the message change.
  const headBadge = h('span');
  const headMsg = h('div');
  head.append(h('p', null, h('a', { href: '#/spaces' }, '← All spaces')),
    h('h1', null, providerMark(sp.provider, false), sp.name, headBadge, h('span', { class: 'spacer' }), deregBtn), headMsg);

  // Labels: chips, and an editor that replaces the whole set. No
  // If-Match, as for Deregister: probes move the version every few
  // seconds, and what the user saves is the set shown in the editor.
  const labelsList = h('div', { id: 'labels-list' });
  const labelsInput = h('input', { id: 'labels-input', name: 'labels', 'data-field': 'labels', autocomplete: 'off', spellcheck: 'false', placeholder: 'env=prod, team=payments' });
  const labelsErr = h('div');
  const labelsForm = h('form', { id: 'labels-form', 'aria-label': 'Edit labels', novalidate: true, hidden: true },
    field('Labels', labelsInput, 'key=value, comma separated; the whole set (empty removes them all)'), labelsErr,
    h('div', { class: 'row' }, h('button', { type: 'submit', class: 'primary', id: 'labels-save' }, 'Save labels'),
      h('button', { type: 'button', id: 'labels-cancel', onclick: () => { labelsForm.hidden = true; labelsEdit.hidden = false; labelsEdit.focus(); } }, 'Cancel')));
  const labelsEdit = h('button', { type: 'button', id: 'labels-edit' }, 'Edit labels');
  labelsEdit.addEventListener('click', () => {
    labelsInput.value = Object.entries(sp.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ');
    showFieldErrors(labelsForm, null); labelsErr.replaceChildren();
    labelsForm.hidden = false; labelsEdit.hidden = true; labelsInput.focus();
  });
  labelsForm.addEventListener('submit', async e => {
    e.preventDefault();
    const { labels, bad } = parseLabels(labelsInput.value);
    try {
      const invalid = validate(labelsForm, bad.slice(0, 1));
      if (invalid) throw invalid;
      sp = await api.put(`/spaces/${id}/labels`, { labels });
      showFieldErrors(labelsForm, null); labelsErr.replaceChildren();
      labelsForm.hidden = true; labelsEdit.hidden = false;
      renderHead();
      flash('Labels saved.');
    } catch (x) {
      const rest = showFieldErrors(labelsForm, x);
      labelsErr.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The labels were not saved') : '');
    }
  });
  labelsCard.replaceChildren(h('div', { class: 'row' }, h('h2', null, 'Labels'), h('span', { class: 'spacer' }), labelsEdit), labelsList, labelsForm);

  function renderHead() {
    labelsList.replaceChildren(labelChips(sp.labels, true) || h('p', { class: 'muted' }, 'No labels.'));
    headBadge.replaceChildren(badge(sp.status, sp.probe && sp.probe.reason, sp.connectivity), factBadges(sp));
    renderAgent();
    headMsg.replaceChildren();
    if (sp.status !== 'active' && sp.probe && sp.probe.message) headMsg.append(h('div', { class: 'alert warn' }, sp.probe.message));
    const cfg = Object.entries(sp.config).map(([k, v]) => [k, v]);
    // Identity changes almost never: redrawn only then, so a selection in
    // it (the id, to copy) survives the probe's changes.
    const idSig = JSON.stringify([sp.name, sp.space_type, sp.connectivity, sp.config, sp.cloud_account_id, accountName, sp.synthetic, sp.created_at]);
    if (idSig !== identitySig) identity.replaceChildren(h('h2', null, 'Identity'), h('dl', { class: 'kv' },
      kv('Provider', PROVIDERS[sp.provider]), kv('Type', sp.space_type),
      kv('Connectivity', sp.connectivity === 'agent' ? 'agent (the agent in the cluster connects out)' : 'direct (Spaces calls the API server)'), ...cfg.map(([k, v]) => kv(k, h('code', null, v))),
      kv('Cloud account', h('a', { href: `#/accounts/${sp.cloud_account_id}/clusters`, id: 'space-account' }, accountName || sp.cloud_account_id)),
      kv('Synthetic', sp.synthetic ? 'yes' : 'no'), kv('Registered', when(sp.created_at)), kv('Space id', h('code', null, sp.id))));
    identitySig = idSig;
    const p = sp.probe || {};
    // Before the first probe (or lease) there is no failure to count.
    const waiting = ['NotProbed', 'AgentNotConnected'].includes(p.reason);
    probe.replaceChildren(h('h2', null, 'Last probe'), h('dl', { class: 'kv' },
      kv('Status', badge(sp.status, p.reason)), kv('Last probed', probedWhen(p.last_probe_at)), kv('Last success', probedWhen(p.last_success_at)),
      kv('Status since', h('span', { id: 'status-since' }, p.reason === 'ProbeStale' ? sinceText(sp) : when(p.last_transition_at))), kv('Latency', p.latency_ms !== undefined ? `${p.latency_ms} ms` : '—'),
      kv('Consecutive failures', waiting ? '— (not probed yet)' : String(p.consecutive_failures)),
      kv('Server version', p.server_version ? `${p.server_version.gitVersion} (${p.server_version.platform})` : '—'),
      kv('Kubernetes version', versionCell(sp)), kv('Support ends', supportCell(sp)), kv('Certificate', h('span', { id: 'space-certificate' }, certificateText(sp))),
      kv('Nodes', h('span', { id: 'space-nodes' }, nodesText(sp))),
      p.message ? kv('Message', p.message) : null));
  }

  // The agent: the install command and its bootstrap Secret, shown once
  // (the token it carries is kept in this page's memory only), and the
  // wait for its first lease.
  let boot = bootstraps.get(id);
  bootstraps.delete(id);
  const agentState = h('p', { id: 'agent-state', role: 'status' });
  const install = h('div', { id: 'agent-install' });
  function renderInstall() {
    if (!boot) {
      const again = h('button', { type: 'button', id: 'agent-reissue' }, 'Issue a new install command');
      const err = h('div');
      again.addEventListener('click', async () => {
        again.disabled = true;
        try { boot = await api.post(`/spaces/${id}/agent-bootstrap`); renderInstall(); } catch (x) { again.disabled = false; err.replaceChildren(errorBox(x, 'No new install command was issued')); }
      });
      install.replaceChildren(h('p', { class: 'muted' }, 'The install command is shown once, when it is issued. A new one replaces an unused one; an installed agent keeps its credential.'), err, h('p', null, again));
      return;
    }
    // The token travels in the bootstrap Secret's manifest, on kubectl's
    // standard input: never on a command line (shell history, ps).
    const cmd = h('pre', { class: 'copy', id: 'install-command', tabindex: '0', 'aria-label': 'Command that installs the agent' }, boot.install);
    const manifest = h('pre', { class: 'copy', id: 'install-manifest', tabindex: '0', 'aria-label': 'The agent’s bootstrap Secret' }, boot.manifest);
    const copy = h('button', { type: 'button', id: 'install-copy' }, 'Copy the bootstrap Secret');
    copy.addEventListener('click', async () => {
      try { await navigator.clipboard.writeText(boot.manifest); flash('Bootstrap Secret copied.'); } catch { flash('Copying was refused: select the text and copy it.', 'warn'); }
    });
    install.replaceChildren(
      h('p', null, 'Run this where kubectl reaches the cluster, with the agent’s manifests ', h('code', null, 'spaces-agent.yaml'), ' (', h('code', null, 'make agent-image'), ' renders them) in the current folder,'),
      cmd,
      h('p', null, 'and give it this bootstrap Secret on its standard input (paste it, then Ctrl-D), so that its token never stands on a command line:'),
      manifest, h('p', null, copy),
      h('p', { class: 'muted', id: 'install-note' }, `Its token works once, until ${stamp(boot.expires_at)}. It is shown only now: leaving this page forgets it.`));
  }
  function renderAgent() {
    agent.hidden = sp.connectivity !== 'agent';
    if (agent.hidden) return;
    if (!agent.firstChild) {
      agent.append(h('h2', { id: 'agent-title' }, 'Agent'), agentState, install);
      renderInstall();
    }
    const reason = sp.probe && sp.probe.reason;
    // The token works once: once the agent has connected, the command on
    // screen is spent.
    if (boot && reason !== 'AgentNotConnected') { boot = null; renderInstall(); }
    agentState.dataset.state = sp.status;
    agentState.textContent = sp.status === 'active' ? 'Connected: the agent renews its lease.'
      : reason === 'AgentNotConnected' ? 'Waiting for the agent’s first connection…'
      : `The agent’s lease is not renewed (${reason || sp.status}).`;
  }

  async function loadHistory() {
    // From the registration at the earliest: a new space is not drawn as
    // mostly unregistered, and the shares count its own time only.
    const now = Date.now(), from = Math.max(now - RANGES[range], Date.parse(sp.created_at) || 0);
    const items = [];
    let cursor = '';
    for (let i = 0; i < 20; i++) {
      const pg = await api.get(`/spaces/${id}/status-history` + qs({ limit: '100', cursor }));
      items.push(...pg.items);
      if (!pg.next_cursor || (pg.items.length && Date.parse(pg.items[pg.items.length - 1].at) < from)) break;
      cursor = pg.next_cursor;
    }
    const seg = h('div', { class: 'seg', role: 'group', 'aria-label': 'Range' }, Object.keys(RANGES).map(k => {
      const b = h('button', { type: 'button', 'aria-pressed': String(k === range) }, k === '24h' ? '24 h' : k.replace('d', ' d'));
      b.addEventListener('click', () => { range = k; loadHistory(); });
      return b;
    }));
    const recent = items.filter(t => Date.parse(t.at) >= from);
    history.replaceChildren(
      h('div', { class: 'row' }, h('h2', null, 'Status history'), h('span', { class: 'spacer' }), seg),
      chart(segments(items, sp, from, now), from, now, now - from < RANGES[range] ? 'since its registration' : `over the last ${range === '24h' ? '24 hours' : range.replace('d', ' days')}`),
      h('details', { id: 'history-changes', open: historyOpen, ontoggle: e => { historyOpen = e.target.open; } },
        h('summary', null, `${recent.length} change${recent.length === 1 ? '' : 's'} in this range`),
        recent.length ? h('table', null, h('thead', null, h('tr', null, ['When', 'From', 'To', 'Reason'].map(t => h('th', { scope: 'col' }, t)))),
          h('tbody', null, recent.map(t => h('tr', null, h('td', null, stamp(t.at)), h('td', null, t.from), h('td', null, t.to),
            h('td', null, [t.reason, t.message].filter(Boolean).join(': ') || '—'))))) : h('p', { class: 'muted' }, 'No change in this range.')));
  }

  const nsBody = h('div', null, h('p', { class: 'loading' }, 'Loading namespaces…'));
  const nsName = patterned({ id: 'ns-name', name: 'name', required: true, 'data-field': 'name', maxlength: 63 }, 'namespace');
  const nsLabels = h('input', { id: 'ns-labels', name: 'labels', 'data-field': 'labels', placeholder: 'team=payments, tier=web', autocomplete: 'off' });
  const nsErr = h('div');
  const nsForm = h('form', { id: 'ns-form', 'aria-label': 'Create a namespace', novalidate: true }, h('h3', null, 'Create a namespace'),
    h('div', { class: 'row' }, field('Name', nsName), field('Labels', nsLabels, 'Optional: key=value, comma separated')),
    nsErr, h('button', { type: 'submit' }, 'Create namespace'));
  nsForm.addEventListener('submit', async e => {
    e.preventDefault();
    const { labels, bad } = parseLabels(nsLabels.value);
    try {
      const invalid = validate(nsForm, bad.slice(0, 1));
      if (invalid) throw invalid;
      await api.post(`/space-discovery/${id}/namespaces`, Object.keys(labels).length ? { name: nsName.value.trim(), labels } : { name: nsName.value.trim() });
      nsErr.replaceChildren(); showFieldErrors(nsForm, null);
      flash(sp.connectivity === 'agent' ? `Namespace ${nsName.value.trim()} requested: the agent creates it at its next connection.` : `Namespace ${nsName.value.trim()} created.`);
      nsForm.reset();
      await loadNamespaces();
    } catch (x) {
      const rest = showFieldErrors(nsForm, x);
      nsErr.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The namespace was not created') : '');
    }
  });
  // A synthetic space has no cluster behind it: nothing to list or create.
  if (sp.synthetic) namespaces.replaceChildren(h('h2', null, 'Namespaces'), h('p', { class: 'muted', id: 'ns-synthetic' }, 'A synthetic space is a placeholder with no cluster behind it: it has no namespaces.'));
  else namespaces.replaceChildren(h('h2', null, 'Namespaces'), nsBody, nsForm);

  async function loadNamespaces() {
    if (sp.synthetic) return;
    try {
      const list = await api.get(`/space-discovery/${id}/namespaces`);
      // An agent space's list is the one its agent last reported.
      const viaAgent = sp.connectivity === 'agent' ? h('p', { class: 'muted', id: 'ns-agent' },
        list.observed_at ? ['As the agent reported them ', when(list.observed_at), '; it reports again at its next connection.'] : 'Waiting for the agent’s first report.',
        (list.pending || []).length ? ` Waiting for the agent to create: ${list.pending.map(p => p.name).join(', ')}.` : '',
        (list.failed || []).map(f => ` ${f.name} was not created: ${f.message}`)) : null;
      nsWaiting = sp.connectivity === 'agent' && !list.observed_at;
      nsBody.replaceChildren(...[viaAgent].filter(Boolean), list.items.length ? h('table', { id: 'ns-table' }, h('thead', null, h('tr', null, ['Name', 'Phase', 'Labels'].map(t => h('th', { scope: 'col' }, t)))),
        h('tbody', null, list.items.map(n => h('tr', { 'data-ns': n.name }, h('td', null, n.name), h('td', null, n.phase || '—'),
          h('td', null, Object.entries(n.labels).filter(([k]) => !k.startsWith('kubernetes.io/')).map(([k, v]) => `${k}=${v}`).join(', ') || '—')))))
        : empty('The cluster has no namespace.'));
      nsFailed = false;
    } catch (x) {
      nsFailed = true;
      const retry = h('button', { type: 'button', id: 'ns-retry' }, 'Try again');
      retry.addEventListener('click', () => loadNamespaces());
      nsBody.replaceChildren(errorBox(x, 'The cluster’s namespaces could not be listed'),
        h('p', { class: 'muted' }, 'Asked again every other refresh. ', retry));
    }
  }

  async function loadBindings() {
    [envs, policies] = await Promise.all([api.all('/environments'), api.all('/autoscaler-policies')]);
    envs = envs.filter(e => e.space_id === id);
    policies = policies.filter(p => p.space_id === id);
    bindings.replaceChildren(h('h2', null, 'Bound to this space'),
      h('h3', null, 'Environments'),
      envs.length ? h('ul', { id: 'bound-envs' }, envs.map(e => h('li', null, h('a', { href: `#/environments/${e.id}` }, e.name), ` → namespace ${e.namespace}`, e.gate ? h('span', { class: 'reason' }, e.gate.reason) : null)))
        : h('p', { class: 'muted' }, 'None. ', h('a', { href: '#/environments' }, 'Create an environment')),
      h('h3', null, 'Autoscaler policies'),
      policies.length ? h('ul', null, policies.map(p => h('li', null, `${p.target.namespace}/${p.target.kind}/${p.target.name} (${p.min_replicas}–${p.max_replicas}) `, h('span', { class: 'reason' }, p.state))))
        : h('p', { class: 'muted' }, 'None.'));
  }

  renderHead();
  api.get(`/cloud-accounts/${sp.cloud_account_id}`).then(a => { accountName = a.name; renderHead(); }).catch(() => {});
  await Promise.all([loadHistory(), loadNamespaces(), loadBindings().catch(x => bindings.replaceChildren(errorBox(x, 'Bindings could not be loaded')))]);
  let lastVersion = sp.version, ticks = 0;
  await ctx.every(async () => {
    try {
      // One request a tick: the space (304 while unchanged), or, while an
      // agent space waits for its agent's first report or the namespaces
      // could not be listed, the namespaces in turn with it.
      if ((nsWaiting || nsFailed) && ticks++ % 2 === 1) { await loadNamespaces(); refreshAges(root); return; }
      const r = await api.poll(`/spaces/${id}`);
      error.replaceChildren();
      if (!r.changed) { refreshAges(root); return; }
      const was = sp.status;
      sp = r.data;
      renderHead();
      if (sp.version !== lastVersion) { lastVersion = sp.version; await loadHistory(); }
      if (nsFailed || sp.status !== was) await loadNamespaces();
    } catch (x) {
      error.replaceChildren(errorBox(x, 'The space could not be refreshed'));
    }
  });
}

function kv(k, v) { return [h('dt', null, k), h('dd', null, v)]; }

// confirmDeregister lists exactly what the cascade will do before asking.
function confirmDeregister(sp, envs, policies, ctx) {
  const live = envs.filter(e => !e.gate);
  const applied = policies.filter(p => p.state === 'applied');
  const dlg = h('dialog', { id: 'deregister-dialog', 'aria-labelledby': 'dereg-title' });
  const err = h('div');
  const yes = h('button', { class: 'danger', type: 'button', id: 'deregister-confirm' }, `Deregister ${sp.name}`);
  const no = h('button', { type: 'button', autofocus: true }, 'Cancel');
  dlg.append(h('h2', { id: 'dereg-title' }, `Deregister ${sp.name}?`),
    h('p', null, 'The cluster itself is not touched. Deregistering will:'),
    h('ul', { id: 'cascade-list' },
      h('li', null, live.length ? [`gate ${live.length} environment${live.length > 1 ? 's' : ''} with “Space deregistered”: `, live.map(e => e.name).join(', '),
        ' (they take no new deployments until re-bound to another space)'] : 'gate no environment (none is bound)'),
      h('li', null, applied.length ? [`stop applying ${applied.length} autoscaler polic${applied.length > 1 ? 'ies' : 'y'}: `,
        applied.map(p => `${p.target.namespace}/${p.target.kind}/${p.target.name}`).join(', '), ' (the cloud-side policy is left as it is)'] : 'stop no autoscaler policy (none is applied)'),
      h('li', null, 'move revisions still queued for it to the dead-letter queue at their next claim'),
      h('li', null, 'remove the credential grant: no kubeconfig can be minted for the cluster any more'),
      h('li', null, 'leave deployments already running on the cluster running')),
    h('p', { class: 'muted' }, 'Registering the cluster again later creates a new space with a new id; environments must then be re-bound by hand.'),
    err, h('div', { class: 'row' }, yes, no));
  document.body.append(dlg);
  const close = () => { dlg.close(); dlg.remove(); };
  no.addEventListener('click', close);
  dlg.addEventListener('cancel', () => dlg.remove());
  yes.addEventListener('click', async () => {
    yes.disabled = true;
    try {
      // No If-Match: probes bump the version every few seconds, and what
      // the user confirmed is the cascade listed here, not a version.
      await ctx.api.del(`/spaces/${sp.id}`);
      close();
      flash(`${sp.name} was deregistered.${live.length ? ' Its environments are being gated.' : ''}`);
      ctx.go('#/spaces');
    } catch (x) {
      yes.disabled = false;
      err.replaceChildren(errorBox(x, x.status === 412 ? 'The space changed since this page read it: cancel and look again' : 'The space was not deregistered'));
    }
  });
  dlg.showModal();
}
