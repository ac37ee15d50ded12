// Integrations: the org's webhook endpoints (create, pause and resume,
// rotate the secret, delete, send a test event) and each endpoint's
// delivery log with its replays. A signing secret is shown once, when the
// API answers it (creation, rotation), and kept in this page's memory
// only: no storage, no URL, so a reload or leaving the screen forgets it.
// An endpoint Spaces disabled is said in words on the screen and on the
// nav item (disabledNotice), not by colour alone.
import { h, errorBox, field, empty, flash, showFieldErrors, when, stamp, refreshAges } from './ui.js';
import { rotation } from './api.js';

// EVENT_TYPES are openapi.yaml's WebhookEventType, in its order, each
// with what it tells (shared/console's TestEventTypesAreTheAPIs keeps the
// two lists the same).
export const EVENT_TYPES = [
  ['space.registered', 'a space was registered'],
  ['space.status_changed', 'a space turned active, inactive or unknown'],
  ['space.deregistered', 'a space was deregistered'],
  ['revision.deployed', 'a revision was applied'],
  ['revision.failed', 'a revision failed'],
  ['revision.stopped', 'a revision stopped on an inactive space'],
  ['provisioning_job.succeeded', 'a provisioning job registered its cluster'],
  ['provisioning_job.failed', 'a provisioning job failed'],
  ['cloud_account.verification_failed', 'a cloud account failed its verification'],
  ['space.version_changed', 'a cluster’s Kubernetes version changed'],
  ['space.support_ending', 'a cluster’s Kubernetes version nears its end of support'],
  ['space.certificate_expiring', 'a cluster’s serving certificate nears its expiry'],
];

// REASONS say in words why Spaces disabled an endpoint (state_reason).
const REASONS = {
  ReceiverGone: 'the receiver answered 410 Gone',
  FailedTooLong: 'every delivery failed for five days',
};

const STATE = { enabled: 'active', paused: 'unknown', disabled: 'inactive' };

// PAGE is the delivery log's page size.
const PAGE = 20;

function reasonText(e) {
  return REASONS[e.state_reason] || e.state_reason || 'Spaces stopped delivering';
}

function stateBadge(e) {
  return h('span', { class: 'status-cell' },
    h('span', { class: `badge s-${STATE[e.state]}`, 'data-state': e.state }, e.state),
    e.state === 'disabled' ? h('span', { class: 'reason', 'data-reason': e.state_reason || '' }, reasonText(e)) : null);
}

// disabledBanner tells which endpoints Spaces disabled, why, since when,
// and what to do; null when none is.
function disabledBanner(list) {
  const off = list.filter(e => e.state === 'disabled');
  if (!off.length) return null;
  return h('div', { class: 'alert error', role: 'alert', id: 'disabled-banner' },
    h('strong', null, off.length === 1 ? 'An endpoint is disabled: ' : `${off.length} endpoints are disabled: `),
    'Spaces no longer delivers events to ', off.length === 1 ? 'it' : 'them', '.',
    h('ul', null, off.map(e => h('li', { 'data-disabled': e.id },
      h('a', { href: `#/integrations/${e.id}` }, e.url), ` — ${reasonText(e)}`,
      e.disabled_at ? [', disabled ', when(e.disabled_at)] : null))),
    h('div', null, 'Fix the receiver, then Resume the endpoint; “Replay since” sends what it missed.'));
}

// disabledNotice marks the nav item with how many endpoints are disabled,
// in words, so the org sees it from any screen.
export function disabledNotice(items) {
  const link = document.querySelector('nav a[href="#/integrations"]');
  if (!link) return;
  const n = items.filter(e => e.state === 'disabled').length;
  let mark = link.querySelector('.nav-alert');
  if (!n) { if (mark) mark.remove(); return; }
  if (!mark) { mark = h('span', { class: 'nav-alert', id: 'nav-integrations-alert' }); link.append(mark); }
  const text = `⚠ ${n} disabled`;
  if (mark.textContent !== text) mark.textContent = text;
}

// watchDisabled asks the endpoints at most once a minute as the user moves
// between screens (a conditional GET: mostly a 304), for disabledNotice.
// org is who is signed in: another org's sign-in drops the mark and asks at once.
let lastWatch = 0, lastOrg;
export function watchDisabled(api, force = false, org = lastOrg) {
  const now = Date.now();
  if (org !== lastOrg) { disabledNotice([]); lastOrg = org; force = true; }
  if (!force && now - lastWatch < 60000) return;
  lastWatch = now;
  api.poll('/webhook-endpoints?limit=100').then(r => disabledNotice(r.data.items), () => {});
}

// secretCard shows a secret the API answered this once, with Copy.
function secretCard(secret, title, note, onDone) {
  const code = h('pre', { class: 'copy', id: 'endpoint-secret', tabindex: '0', 'aria-label': 'The signing secret' }, secret);
  const copy = h('button', { type: 'button', id: 'secret-copy' }, 'Copy the secret');
  copy.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(secret); flash('Secret copied.'); } catch { flash('Copying was refused: select the text and copy it.', 'warn'); }
  });
  const done = h('button', { type: 'button', id: 'secret-done' }, 'I have stored it');
  const card = h('div', { class: 'card secret', id: 'secret-card', role: 'region', 'aria-labelledby': 'secret-title' },
    h('h2', { id: 'secret-title' }, title),
    h('p', null, h('strong', null, 'You will not see it again: '), 'Spaces shows a signing secret only now; leaving or reloading this page forgets it. Store it where your receiver reads it.'),
    note ? h('p', { id: 'secret-note' }, note) : null,
    code, h('div', { class: 'row' }, copy, done));
  done.addEventListener('click', () => { card.remove(); if (onDone) onDone(); });
  return card;
}

// action is a button that runs run once per click and shows its failure in out.
function action(label, attrs, out, run) {
  const b = h('button', { type: 'button', ...attrs }, label);
  b.addEventListener('click', async () => {
    b.disabled = true;
    out.replaceChildren();
    try { await run(); } catch (x) { out.replaceChildren(errorBox(x, `${label} failed`)); } finally { b.disabled = false; }
  });
  return b;
}

// deleteControl asks once more in place before the endpoint is deleted.
function deleteControl(e, api, done) {
  const box = h('div', { class: 'row' });
  const out = h('div');
  const ask = () => {
    const b = h('button', { type: 'button', 'data-delete': e.id, 'aria-label': `Delete the endpoint ${e.url}` }, 'Delete');
    b.addEventListener('click', confirmIt);
    box.replaceChildren(b, out);
  };
  const confirmIt = () => {
    const yes = h('button', { type: 'button', class: 'danger', 'data-delete-confirm': e.id }, 'Delete it');
    const no = h('button', { type: 'button' }, 'Cancel');
    no.addEventListener('click', ask);
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      try { await api.del(`/webhook-endpoints/${e.id}`); flash('Endpoint deleted.'); await done(); } catch (x) { yes.disabled = false; out.replaceChildren(errorBox(x, 'The endpoint was not deleted')); }
    });
    box.replaceChildren(h('p', null, 'Deliveries still queued for it are dropped, and its log goes with it.'), yes, no, out);
    yes.focus();
  };
  ask();
  return box;
}

function pauseControl(e, api, out, done) {
  return e.state === 'enabled'
    ? action('Pause', { 'data-pause': e.id, 'aria-label': `Pause ${e.url}` }, out, async () => { await api.post(`/webhook-endpoints/${e.id}/pause`); flash('Endpoint paused: nothing is delivered until it is resumed.'); await done(); })
    : action('Resume', { 'data-resume': e.id, 'aria-label': `Resume ${e.url}` }, out, async () => { await api.post(`/webhook-endpoints/${e.id}/resume`); flash('Endpoint resumed.'); await done(); });
}

export async function integrations(root, _, ctx) {
  const { api } = ctx;
  const banner = h('div', { id: 'banner' });
  const list = h('div', { id: 'endpoints' }, h('p', { class: 'loading' }, 'Loading endpoints…'));
  const secretSlot = h('div');
  root.replaceChildren(h('h1', null, 'Integrations'),
    h('p', { class: 'muted' }, 'Webhook endpoints receive the org’s events, signed per Standard Webhooks v1, retried on failure, each attempt in the endpoint’s delivery log.'),
    banner, secretSlot,
    h('div', { class: 'card' }, h('h2', null, 'Endpoints'), list),
    createForm(ctx, async created => {
      secretSlot.replaceChildren(secretCard(created.secret, 'The endpoint’s signing secret', null));
      secretSlot.scrollIntoView({ block: 'nearest' });
      document.getElementById('secret-copy').focus();
      await reload();
    }));

  let items = [];
  function draw() {
    banner.replaceChildren(disabledBanner(items) || '');
    disabledNotice(items);
    if (!items.length) { list.replaceChildren(empty('No endpoint yet: add one below.')); return; }
    list.replaceChildren(h('table', { class: 'stack', id: 'endpoints-table' },
      h('thead', null, h('tr', null, ['Endpoint', 'Events', 'State', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, items.map(e => {
        const out = h('div');
        return h('tr', { 'data-endpoint': e.id, 'data-state': e.state },
          h('td', { 'data-label': 'Endpoint' }, h('a', { href: `#/integrations/${e.id}`, class: 'url' }, e.url),
            e.description ? h('div', { class: 'muted' }, e.description) : null,
            e.label_selector ? h('div', { class: 'muted' }, 'spaces matching ', h('code', null, e.label_selector)) : null),
          h('td', { 'data-label': 'Events' }, h('ul', { class: 'chips' }, e.event_types.map(t => h('li', { class: 'chip' }, t)))),
          h('td', { 'data-label': 'State' }, stateBadge(e), failing(e)),
          h('td', { 'data-label': '' }, h('div', { class: 'row' }, pauseControl(e, api, out, reload), deleteControl(e, api, reload)), out));
      }))));
  }
  async function load(page) {
    items = page.next_cursor ? await api.all('/webhook-endpoints') : page.items;
    draw();
  }
  async function reload() { await load(await api.get('/webhook-endpoints?limit=100')); }
  const tick = rotation(api, [{ path: () => '/webhook-endpoints?limit=100', changed: load }]);
  await ctx.every(async () => {
    try { await tick(); refreshAges(root); } catch (x) { list.replaceChildren(errorBox(x, 'The endpoints could not be loaded')); }
  });
}

// failing says since when an enabled endpoint's attempts fail, and when
// Spaces will disable it.
function failing(e) {
  if (e.state !== 'enabled' || !e.failing_since) return null;
  const off = new Date(Date.parse(e.failing_since) + 5 * 86400000).toISOString();
  return h('div', { class: 'reason', 'data-failing': e.id }, 'failing since ', when(e.failing_since), `; disabled on ${stamp(off)} unless one is delivered`);
}

// createForm is drawn once: a poll never redraws it under the user's typing.
function createForm(ctx, onCreated) { return endpointForm(ctx, null, onCreated); }

// endpointForm adds an endpoint (ep null) or changes ep (PATCH, every field
// sent: "" removes a description or a selector), with the API's errors
// under the fields they name.
function endpointForm(ctx, ep, onDone, onCancel) {
  const { api } = ctx;
  const url = h('input', { id: 'ep-url', name: 'url', type: 'url', required: true, maxlength: 2048, 'data-field': 'url', autocomplete: 'off', spellcheck: 'false', placeholder: 'https://hooks.example.com/spaces' });
  const desc = h('input', { id: 'ep-description', name: 'description', maxlength: 500, 'data-field': 'description', autocomplete: 'off' });
  const selector = h('input', { id: 'ep-selector', name: 'label_selector', maxlength: 1024, 'data-field': 'label_selector', autocomplete: 'off', spellcheck: 'false', placeholder: 'env=prod' });
  const boxes = EVENT_TYPES.map(([t, what], i) => h('input', { type: 'checkbox', id: `ep-type-${t.replace(/[._]/g, '-')}`, value: t, name: 'event_types', 'data-field': i === 0 ? 'event_types' : undefined }));
  const types = h('fieldset', { class: 'field types', id: 'ep-types' }, h('legend', null, 'Event types'),
    h('ul', { class: 'type-list' }, EVENT_TYPES.map(([t, what], i) => h('li', null, boxes[i], ' ', h('label', { for: boxes[i].id }, h('code', null, t)), h('span', { class: 'muted' }, ` ${what}`)))));
  const err = h('div');
  const submit = h('button', { class: 'primary', type: 'submit' }, ep ? 'Save changes' : 'Add endpoint');
  const cancel = ep ? h('button', { type: 'button', id: 'edit-cancel' }, 'Cancel') : null;
  if (cancel) cancel.addEventListener('click', () => onCancel());
  if (ep) {
    url.value = ep.url;
    desc.value = ep.description || '';
    selector.value = ep.label_selector || '';
    boxes.forEach(b => { b.checked = ep.event_types.includes(b.value); });
  }
  const form = h('form', { class: 'card', id: ep ? 'endpoint-edit' : 'endpoint-form', novalidate: true }, h('h2', null, ep ? 'Edit the endpoint' : 'Add an endpoint'),
    field('URL', url, 'https only; an address Spaces refuses (private, loopback, link-local, metadata) is said here.'),
    types,
    field('Label selector (optional)', selector, 'Only events about spaces whose labels match; cloud account events are not narrowed.'),
    field('Description (optional)', desc),
    err, h('div', { class: 'row' }, submit, cancel));
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    err.replaceChildren();
    const body = { url: url.value.trim(), event_types: boxes.filter(b => b.checked).map(b => b.value) };
    if (desc.value.trim() || ep) body.description = desc.value.trim();
    if (selector.value.trim() || ep) body.label_selector = selector.value.trim();
    // openapi.yaml forbids an empty list, so it is never sent: said as the API says it.
    if (!body.event_types.length) {
      const rest = showFieldErrors(form, { problem: { errors: [{ field: 'event_types', reason: 'must name at least one event type' }] } });
      if (!rest.length) boxes[0].focus();
      return;
    }
    submit.disabled = true;
    try {
      if (ep) {
        const changed = await api.patch(`/webhook-endpoints/${ep.id}`, body);
        showFieldErrors(form, null);
        flash('Endpoint changed.');
        await onDone(changed);
        return;
      }
      const created = await api.post('/webhook-endpoints', body);
      form.reset();
      showFieldErrors(form, null);
      flash('Endpoint added.');
      await onDone(created);
    } catch (x) {
      // event_types.N names a checkbox the page sent N-th: the group shows it.
      if (x.problem && x.problem.errors) x.problem.errors = x.problem.errors.map(e => e.field.startsWith('event_types') ? { ...e, field: 'event_types' } : e);
      // Each error the form shows under its field is not said again above the button.
      const rest = showFieldErrors(form, x);
      err.replaceChildren(errorBox(x.problem ? { status: x.status, message: x.message, problem: { ...x.problem, errors: rest } } : x, ep ? 'The endpoint was not changed' : 'The endpoint was not added'));
    } finally { submit.disabled = false; }
  });
  return form;
}

export async function integrationDetail(root, [id], ctx) {
  const { api } = ctx;
  const head = h('div', null, h('p', { class: 'loading' }, 'Loading the endpoint…'));
  const banner = h('div');
  const secretSlot = h('div');
  // The edit form lives here, apart from what a poll redraws.
  const editSlot = h('div');
  const out = h('div', { id: 'endpoint-result', role: 'status' });
  const tools = h('div', { class: 'row', id: 'endpoint-actions' });
  const log = h('div', { id: 'deliveries' }, h('p', { class: 'loading' }, 'Loading the delivery log…'));
  const pager = h('div', { class: 'pager' });
  const replayOut = h('div', { id: 'replay-result', role: 'status' });
  const since = h('input', { type: 'datetime-local', id: 'replay-since', step: 1, value: localInput(Date.now() - 3600000) });
  const replayBtn = h('button', { type: 'button', id: 'replay-since-go' }, 'Replay since');
  root.replaceChildren(h('p', null, h('a', { href: '#/integrations' }, '← Integrations')),
    banner, head, secretSlot, tools, editSlot, out,
    h('div', { class: 'card' }, h('h2', null, 'Delivery log'),
      h('p', { class: 'muted' }, 'Every attempt, newest first, kept 30 days. A replay sends the event again under its original webhook-id (a receiver that has it drops it), signed with the current secret.'),
      log, pager,
      h('div', { class: 'row replay' }, field('Replay every event first sent since', since), replayBtn), replayOut));

  let ep = null, shownState;
  // cursors[i] is the cursor of page i (page 0 has none).
  const cursors = [''];
  let pageNo = 0, nextCursor = null;
  const logPath = () => `/webhook-endpoints/${id}/deliveries?limit=${PAGE}${cursors[pageNo] ? '&cursor=' + encodeURIComponent(cursors[pageNo]) : ''}`;

  function drawEndpoint() {
    banner.replaceChildren(ep.state === 'disabled' ? h('div', { class: 'alert error', role: 'alert', id: 'disabled-banner' },
      h('strong', null, 'This endpoint is disabled: '), `Spaces no longer delivers events to it (${reasonText(ep)}`,
      ep.disabled_at ? [', disabled ', when(ep.disabled_at)] : null, '). Fix the receiver, then Resume it; “Replay since” sends what it missed.') : '');
    // The nav item counts every endpoint: asked again when this one's state changed.
    if (shownState !== undefined && shownState !== ep.state) watchDisabled(api, true);
    shownState = ep.state;
    head.replaceChildren(h('h1', null, 'Endpoint'),
      h('div', { class: 'card', id: 'endpoint' }, h('dl', { class: 'kv' },
        h('dt', null, 'URL'), h('dd', null, h('code', { class: 'url' }, ep.url)),
        h('dt', null, 'State'), h('dd', null, stateBadge(ep), failing(ep)),
        h('dt', null, 'Events'), h('dd', null, h('ul', { class: 'chips' }, ep.event_types.map(t => h('li', { class: 'chip' }, t)))),
        ep.label_selector ? [h('dt', null, 'Spaces'), h('dd', null, 'matching ', h('code', null, ep.label_selector))] : null,
        ep.description ? [h('dt', null, 'Description'), h('dd', null, ep.description)] : null,
        h('dt', null, 'Created'), h('dd', null, when(ep.created_at)),
        h('dt', null, 'Id'), h('dd', null, h('code', null, ep.id)))));
    const test = action('Send test event', { id: 'send-test' }, out, async () => {
      const r = await api.post(`/webhook-endpoints/${id}/test`);
      testResult = h('span', { id: 'test-result' }, 'its attempt appears in the log below.');
      out.replaceChildren(h('div', { class: 'alert info', 'data-test-id': r.webhook_id }, 'Test event queued as ', h('code', null, r.webhook_id), ': ', testResult));
      testID = r.webhook_id;
      await showFirstPage();
    });
    const rotate = action('Rotate secret', { id: 'rotate-secret' }, out, async () => {
      const r = await api.post(`/webhook-endpoints/${id}/rotate-secret`);
      secretSlot.replaceChildren(secretCard(r.secret, 'The new signing secret',
        'For the next 24 hours every delivery carries two signatures, one with the new secret and one with the old: both sign, so switch your receiver to the new one within that time.'));
      document.getElementById('secret-copy').focus();
    });
    const edit = h('button', { type: 'button', id: 'edit-endpoint' }, 'Edit');
    edit.addEventListener('click', () => {
      const close = () => { editSlot.replaceChildren(); document.getElementById('edit-endpoint')?.focus(); };
      editSlot.replaceChildren(endpointForm(ctx, ep, async changed => { ep = changed; drawEndpoint(); close(); }, close));
      document.getElementById('ep-url').focus();
    });
    tools.replaceChildren(test, edit, pauseControl(ep, api, out, async () => { ep = await api.get(`/webhook-endpoints/${id}`); drawEndpoint(); }), rotate,
      deleteControl(ep, api, async () => ctx.go('#/integrations')));
  }

  // The test event's result: its newest attempt in the log's first page.
  let testID = null, testResult = null;
  function showTestResult(items) {
    const d = testID && items.find(x => x.webhook_id === testID);
    if (!d || !testResult || !testResult.isConnected) return;
    const ok = d.status >= 200 && d.status < 300;
    testResult.replaceChildren(ok ? `delivered: the receiver answered ${d.status} in ${d.latency_ms} ms.`
      : `not delivered: ${d.status ? `the receiver answered ${d.status}` : 'no answer'}${d.error ? ` (${d.error})` : ''}${d.next_at ? `; next try ${stamp(d.next_at)}` : ''}.`);
    testResult.dataset.status = d.status;
    testResult.dataset.verdict = d.verdict;
  }

  function drawLog(page) {
    if (pageNo === 0) showTestResult(page.items);
    nextCursor = page.next_cursor || null;
    if (!page.items.length) {
      log.replaceChildren(empty(pageNo ? 'No older attempt.' : 'No delivery attempt yet: send a test event.'));
    } else {
      log.replaceChildren(h('table', { class: 'stack', id: 'deliveries-table' },
        h('thead', null, h('tr', null, ['Time', 'Event', 'Attempt', 'Status', 'Latency', 'Error', 'Next retry', ''].map(t => h('th', { scope: 'col' }, t)))),
        h('tbody', null, page.items.map(d => deliveryRow(d, api, id, replayOut)))));
    }
    const older = h('button', { type: 'button', id: 'log-older', disabled: !nextCursor }, 'Older');
    const newer = h('button', { type: 'button', id: 'log-newer', disabled: pageNo === 0 }, 'Newer');
    older.addEventListener('click', () => { cursors[pageNo + 1] = nextCursor; pageNo++; showPage(); });
    newer.addEventListener('click', () => { pageNo--; showPage(); });
    pager.replaceChildren(newer, h('span', { class: 'muted', id: 'log-page' }, `page ${pageNo + 1}`), older);
  }
  async function showPage() {
    try { drawLog(await api.get(logPath())); } catch (x) { log.replaceChildren(errorBox(x, 'The delivery log could not be loaded')); }
  }
  async function showFirstPage() { pageNo = 0; cursors.length = 1; await showPage(); }

  replayBtn.addEventListener('click', async () => {
    const t = Date.parse(since.value);
    replayOut.replaceChildren();
    if (Number.isNaN(t)) { replayOut.replaceChildren(h('div', { class: 'alert error', role: 'alert' }, 'Choose the time to replay from.')); return; }
    replayBtn.disabled = true;
    try {
      const r = await api.post(`/webhook-endpoints/${id}/replay`, { since: new Date(t).toISOString() });
      const n = r.webhook_ids.length;
      replayOut.replaceChildren(h('div', { class: 'alert info', 'data-replayed': n },
        n ? `${n} event${n === 1 ? '' : 's'} queued again under their original webhook-ids.` : 'No event was first sent since then.',
        r.next_since ? [' More remain: replay again from ', stamp(r.next_since), ' (the field now says it).'] : null));
      if (r.next_since) since.value = localInput(Date.parse(r.next_since));
      await showFirstPage();
    } catch (x) { replayOut.replaceChildren(errorBox(x, 'Nothing was replayed')); } finally { replayBtn.disabled = false; }
  });

  const tick = rotation(api, [
    { path: () => `/webhook-endpoints/${id}`, changed: e => { ep = e; drawEndpoint(); } },
    { path: logPath, changed: drawLog },
  ]);
  await ctx.every(async () => {
    try { await tick(); refreshAges(root); } catch (x) {
      if (!ep) head.replaceChildren(errorBox(x, 'The endpoint could not be loaded'));
      else log.replaceChildren(errorBox(x, 'The delivery log could not be loaded'));
    }
  });
}

function deliveryRow(d, api, id, out) {
  const ok = d.status >= 200 && d.status < 300;
  const replay = h('button', { type: 'button', 'data-replay': d.webhook_id, 'aria-label': `Replay ${d.type} ${d.webhook_id}` }, 'Replay');
  replay.addEventListener('click', async () => {
    replay.disabled = true;
    out.replaceChildren();
    try {
      await api.post(`/webhook-endpoints/${id}/deliveries/${encodeURIComponent(d.webhook_id)}/replay`);
      out.replaceChildren(h('div', { class: 'alert info', 'data-replayed-id': d.webhook_id }, 'Queued again as ', h('code', null, d.webhook_id), ': its attempt appears in the log.'));
    } catch (x) { out.replaceChildren(errorBox(x, 'It was not replayed')); } finally { replay.disabled = false; }
  });
  return h('tr', { 'data-webhook-id': d.webhook_id, 'data-attempt': d.attempt, 'data-status': d.status, 'data-verdict': d.verdict },
    h('td', { 'data-label': 'Time' }, h('span', { title: stamp(d.at) }, stamp(d.at))),
    h('td', { 'data-label': 'Event' }, h('code', null, d.type), h('div', { class: 'muted' }, h('code', { class: 'wid' }, d.webhook_id))),
    h('td', { 'data-label': 'Attempt' }, String(d.attempt)),
    h('td', { 'data-label': 'Status' }, h('span', { class: `badge s-${ok ? 'active' : d.verdict === 'retry' ? 'unknown' : 'inactive'}` }, d.status ? String(d.status) : 'no answer'),
      h('span', { class: 'reason' }, d.verdict)),
    h('td', { 'data-label': 'Latency' }, `${d.latency_ms} ms`),
    h('td', { 'data-label': 'Error' }, d.error ? h('span', { class: 'excerpt' }, d.error) : '—'),
    h('td', { 'data-label': 'Next retry' }, d.next_at ? stamp(d.next_at) : '—'),
    h('td', { 'data-label': '' }, replay));
}

// localInput is t as a datetime-local input's value, in the reader's zone.
function localInput(t) {
  const d = new Date(t);
  const p = n => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
