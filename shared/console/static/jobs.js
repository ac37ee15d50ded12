// Provisioning jobs: start one (provision.js), follow their states and
// steps, retry a failed one, cancel a live one; and, beside them, the org's stopped revisions
// (GET /revisions?state=stopped), each with its re-enqueue once its space is
// active again.
import { h, providerMark, errorBox, empty, flash, when, refreshAges, tombstoneOf } from './ui.js';
import { revisionRow } from './environments.js';
import { rotation } from './api.js';
import { provisionForm } from './provision.js';

// STOPPED is how many stopped revisions the page shows.
const STOPPED = 100;

// The badge colour of each state.
const JOB = { queued: 'unknown', creating: 'unknown', 'waiting-ready': 'unknown', registering: 'unknown', succeeded: 'active', failed: 'inactive', canceled: 'inactive' };

export async function jobs(root, _, ctx) {
  const { api } = ctx;
  const list = h('div', { id: 'jobs' }, h('p', { class: 'loading' }, 'Loading provisioning jobs…'));
  const stopped = h('div', { id: 'stopped-revisions' }, h('p', { class: 'loading' }, 'Loading revisions…'));
  const form = h('div', null, h('p', { class: 'loading' }, 'Loading accounts…'));
  root.replaceChildren(h('h1', null, 'Provisioning jobs'),
    h('p', { class: 'muted' }, 'Clusters being created in your cloud accounts; each becomes a space once it is ready.'),
    form,
    h('div', { class: 'card' }, h('h2', null, 'Jobs'), list),
    h('div', { class: 'card' }, h('h2', null, 'Stopped revisions'),
      h('p', { class: 'muted' }, 'Revisions that stopped on an inactive space, most recently stopped first: re-enqueue each once its space is active.'), stopped));

  // Rebuilt only when something changed, so a button is not replaced under
  // the pointer. A tick asks one of the jobs, the stopped revisions and the
  // fleet's counts (a space's status decides a Re-enqueue), in turn.
  let stoppedPage = null;
  async function loadJobs(page) {
    const items = page.next_cursor ? await api.all('/provisioning-jobs') : page.items;
    if (!items.length) { list.replaceChildren(empty('No provisioning job yet: provision a cluster above.')); return; }
    list.replaceChildren(h('table', { class: 'stack', id: 'job-table' },
      h('thead', null, h('tr', null, ['Cluster', 'State', 'Steps', 'Updated', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, items.map(j => jobRow(j, ctx, reload)))));
  }
  let lastRevs = '';
  async function loadRevisions() {
    const page = stoppedPage;
    if (!page) return;
    const revs = page.items;
    const spaces = new Map(), gone = new Map();
    for (const r of revs) {
      if (!spaces.has(r.space_id)) spaces.set(r.space_id, await api.get(`/spaces/${r.space_id}`).catch(x => { gone.set(r.space_id, tombstoneOf(x)); return null; }));
    }
    const sig = JSON.stringify([revs.map(r => [r.id, r.version]), [...spaces.values()].map(s => s && s.status), page.next_cursor ? 1 : 0]);
    if (sig === lastRevs) return;
    lastRevs = sig;
    if (!revs.length) { stopped.replaceChildren(empty('No stopped revision.')); return; }
    stopped.replaceChildren(h('table', { class: 'stack', id: 'rev-table' },
      h('thead', null, h('tr', null, ['Revision', 'State', 'Attempts', 'Updated', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, revs.map(r => revisionRow(r, spaces.get(r.space_id), ctx, reload, gone.get(r.space_id))))),
      page.next_cursor ? h('p', { class: 'muted' }, `The ${STOPPED} most recently stopped.`) : '');
  }
  const tick = rotation(api, [
    { path: () => '/provisioning-jobs?limit=100', changed: p => loadJobs(p).catch(x => list.replaceChildren(errorBox(x, 'The provisioning jobs could not be loaded'))) },
    { path: () => `/revisions?state=stopped&limit=${STOPPED}`, changed: p => { stoppedPage = p; return loadRevisions(); } },
    { path: () => '/space-counts', changed: () => loadRevisions() },
  ]);
  // After the user's own action: read everything again at once.
  async function reload() {
    const [j, r] = await Promise.all([api.get('/provisioning-jobs?limit=100'), api.get(`/revisions?state=stopped&limit=${STOPPED}`)]);
    await loadJobs(j);
    stoppedPage = r;
    await loadRevisions();
  }
  // The form is drawn once (a tick never redraws it under the user's
  // typing); a new job reloads the list at once.
  api.all('/cloud-accounts').then(accts => form.replaceWith(provisionForm(ctx, accts, reload)),
    x => form.replaceChildren(errorBox(x, 'The cloud accounts could not be loaded')));
  await ctx.every(async () => {
    try {
      await tick();
      refreshAges(root);
    } catch (x) {
      stopped.replaceChildren(errorBox(x, 'The revisions could not be loaded'));
    }
  });
}

function jobRow(j, ctx, load) {
  const act = h('td');
  const button = (label, run, done) => {
    const b = h('button', { type: 'button' }, label);
    b.addEventListener('click', async () => {
      b.disabled = true;
      try { await run(); flash(done); await load(); } catch (x) { b.disabled = false; act.append(errorBox(x, `${label} failed`)); }
    });
    return b;
  };
  // A retry as is helps only where the failure says so; otherwise the
  // cause must be fixed first (a quota raised, a network fixed), and the
  // button says that instead of promising a retry that fails the same way.
  if (j.state === 'failed') act.append(button(j.failure && !j.failure.retryable ? 'Retry after fixing the cause' : 'Retry',
    () => ctx.api.post(`/provisioning-jobs/${j.id}/retry`), 'Job queued again.'));
  if (!['succeeded', 'canceled', 'registering'].includes(j.state)) act.append(button('Cancel', () => ctx.api.del(`/provisioning-jobs/${j.id}`), 'Job canceled.'));
  const steps = h('ol', { class: 'steps' }, j.steps.map(s => h('li', { 'data-step': s.state },
    h('span', { class: `badge s-${JOB[s.state]}` }, s.state), ' ', when(s.at),
    s.cloud_status ? h('span', { class: 'reason' }, s.cloud_status) : null, s.message ? h('span', { class: 'reason' }, s.message) : null)));
  return h('tr', { 'data-job': j.id, 'data-state': j.state },
    h('td', { 'data-label': 'Cluster' }, providerMark(j.provider, false), ' ', j.config.clusterName,
      j.space_id ? h('div', null, h('a', { href: `#/spaces/${j.space_id}` }, 'its space')) : null),
    h('td', { 'data-label': 'State' }, h('span', { class: `badge s-${JOB[j.state]}` }, j.state),
      // The failure's words once: its step already shows them when it carries them.
      j.failure ? h('div', { class: 'reason', role: 'note' }, `${j.failure.reason} at ${j.failure.step}` +
        (j.steps.some(s => s.message === j.failure.message) ? '' : `: ${j.failure.message}`) + (j.failure.retryable ? '' : ' (a retry will not help until the cause is fixed)')) : null,
      j.left_in_cloud ? h('div', { class: 'reason' }, j.left_in_cloud) : null),
    h('td', { 'data-label': 'Steps' }, steps),
    h('td', { 'data-label': 'Updated' }, when(j.updated_at)), act);
}
