// Provisioning jobs: start one (provision.js), follow their states and
// steps, retry a failed one, cancel a live one. (The org's stopped
// revisions are on the environments page, with the revisions.)
import { h, providerMark, errorBox, empty, flash, when, refreshAges } from './ui.js';
import { rotation } from './api.js';
import { provisionForm } from './provision.js';

// The badge colour of each state.
const JOB = { queued: 'unknown', creating: 'unknown', 'waiting-ready': 'unknown', registering: 'unknown', succeeded: 'active', failed: 'inactive', canceled: 'inactive' };

export async function jobs(root, _, ctx) {
  const { api } = ctx;
  const list = h('div', { id: 'jobs' }, h('p', { class: 'loading' }, 'Loading provisioning jobs…'));
  const form = h('div', null, h('p', { class: 'loading' }, 'Loading accounts…'));
  root.replaceChildren(h('h1', null, 'Provisioning jobs'),
    h('p', { class: 'muted' }, 'Clusters being created in your cloud accounts; each becomes a space once it is ready.'),
    form,
    h('div', { class: 'card' }, h('h2', null, 'Jobs'), list));

  // Rebuilt only when something changed, so a button is not replaced under
  // the pointer. A tick asks the jobs, with their ETag.
  async function loadJobs(page) {
    const items = page.next_cursor ? await api.all('/provisioning-jobs') : page.items;
    if (!items.length) { list.replaceChildren(empty('No provisioning job yet: provision a cluster above.')); return; }
    list.replaceChildren(h('table', { class: 'stack', id: 'job-table' },
      h('thead', null, h('tr', null, ['Cluster', 'State', 'Steps', 'Updated', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, items.map(j => jobRow(j, ctx, reload, () => formCard)))));
  }
  const tick = rotation(api, [
    { path: () => '/provisioning-jobs?limit=100', changed: p => loadJobs(p) },
  ]);
  // After the user's own action: read the jobs again at once.
  async function reload() {
    await loadJobs(await api.get('/provisioning-jobs?limit=100'));
  }
  // The form is drawn once (a tick never redraws it under the user's
  // typing); a new job reloads the list at once.
  let formCard = null;
  api.all('/cloud-accounts').then(accts => { formCard = provisionForm(ctx, accts, reload); form.replaceWith(formCard); },
    x => form.replaceChildren(errorBox(x, 'The cloud accounts could not be loaded')));
  await ctx.every(async () => {
    try {
      await tick();
      refreshAges(root);
    } catch (x) {
      list.replaceChildren(errorBox(x, 'The provisioning jobs could not be loaded'));
    }
  });
}

function jobRow(j, ctx, load, formOf) {
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
  // A job's settings cannot be edited: when they are the cause (a version
  // or machine type the cloud refused), the job is canceled, which frees
  // its cluster's name, and its settings go to the form to be changed.
  if (j.state === 'failed' && j.failure && !j.failure.retryable) act.append(button('Change the settings', async () => {
    const form = formOf();
    if (!form) throw new Error('the form is not ready yet');
    await ctx.api.del(`/provisioning-jobs/${j.id}`);
    if (!form.fill(j)) throw new Error('its cloud account cannot create clusters any more');
  }, `${j.config.clusterName}'s job was canceled; its settings are in the form above: change what the cloud refused and provision again.`));
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
