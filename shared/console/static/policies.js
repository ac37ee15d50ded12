// Autoscaler policies: the org's policies (GET /autoscaler-policies) and
// a form to create one on a space the autoscaler picker allows; each row
// deletes its policy after asking once more, at the version shown
// (If-Match), so a policy that changed meanwhile is not deleted unseen.
import { h, errorBox, field, empty, flash, showFieldErrors, when, refreshAges, validate, patterned } from './ui.js';
import { rotation } from './api.js';

// NAME is openapi.yaml's PolicyTarget.name pattern.
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export async function policies(root, _, ctx) {
  const { api } = ctx;
  const list = h('div', { id: 'policies' }, h('p', { class: 'loading' }, 'Loading policies…'));
  const space = h('select', { id: 'pol-space', required: true, 'data-field': 'space_id' }, h('option', { value: '' }, 'Loading spaces…'));
  const ns = patterned({ id: 'pol-namespace', required: true, 'data-field': 'target.namespace', maxlength: 63 }, 'namespace');
  const kind = h('select', { id: 'pol-kind', 'data-field': 'target.kind' }, ['Deployment', 'StatefulSet', 'ReplicaSet'].map(k => h('option', { value: k }, k)));
  const name = h('input', { id: 'pol-name', required: true, 'data-field': 'target.name', maxlength: 253, autocomplete: 'off', spellcheck: 'false' });
  const min = h('input', { id: 'pol-min', type: 'number', min: 0, max: 1000, required: true, 'data-field': 'min_replicas', value: '1' });
  const max = h('input', { id: 'pol-max', type: 'number', min: 1, max: 1000, required: true, 'data-field': 'max_replicas', value: '3' });
  const err = h('div');
  const form = h('form', { class: 'card', id: 'pol-form', 'aria-labelledby': 'pol-title', novalidate: true }, h('h2', { id: 'pol-title' }, 'Create a policy'),
    h('div', { class: 'row' }, field('Space', space, 'Inactive and synthetic spaces are not offered.'), field('Namespace', ns), field('Kind', kind), field('Workload name', name),
      field('Min replicas', min, '0 to 1000'), field('Max replicas', max, '1 to 1000, at least the min')),
    err, h('button', { class: 'primary', type: 'submit' }, 'Create policy'));
  root.replaceChildren(h('h1', null, 'Autoscaler policies'), h('div', { class: 'card' }, list), form);

  api.get('/spaces?picker=autoscaler&sort=name&limit=100').then(page => {
    space.replaceChildren(h('option', { value: '' }, page.items.length ? 'Choose a space…' : 'No space can take a policy now'),
      ...page.items.map(sp => h('option', { value: sp.id }, `${sp.name} · ${sp.provider} · ${sp.status}`)));
  }, x => space.replaceChildren(h('option', { value: '' }, `The spaces could not be loaded: ${x.message}`)));

  // The schema's rules (CreateAutoscalerPolicyRequest), checked before
  // anything is sent; the server's own answer is still shown field by field.
  function check() {
    const extra = [];
    const n = name.value.trim();
    if (n && !NAME.test(n)) extra.push({ field: 'target.name', reason: 'must be lowercase letters, digits, - or ., starting and ending with a letter or digit' });
    const lo = Number(min.value), hi = Number(max.value);
    if (min.value !== '' && !(Number.isInteger(lo) && lo >= 0 && lo <= 1000)) extra.push({ field: 'min_replicas', reason: 'must be a whole number from 0 to 1000' });
    if (max.value !== '' && !(Number.isInteger(hi) && hi >= 1 && hi <= 1000)) extra.push({ field: 'max_replicas', reason: 'must be a whole number from 1 to 1000' });
    else if (max.value !== '' && Number.isInteger(lo) && hi < lo) extra.push({ field: 'max_replicas', reason: 'must be at least min_replicas' });
    return validate(form, extra);
  }
  form.addEventListener('submit', async e => {
    e.preventDefault();
    try {
      const invalid = check();
      if (invalid) throw invalid;
      const p = await api.post('/autoscaler-policies', { space_id: space.value, target: { namespace: ns.value.trim(), kind: kind.value, name: name.value.trim() },
        min_replicas: Number(min.value), max_replicas: Number(max.value) });
      showFieldErrors(form, null); err.replaceChildren();
      flash(`Policy for ${p.target.kind} ${p.target.name} created.`);
      name.value = '';
      await reload();
    } catch (x) {
      const rest = showFieldErrors(form, x);
      err.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The policy was not created') : '');
    }
  });

  // The rows whose Delete is being confirmed: a redraw (a policy detached
  // meanwhile) keeps the question open, at the version now shown.
  const confirming = new Set();
  let names = new Map();
  async function draw(page) {
    const items = page.next_cursor ? await api.all('/autoscaler-policies') : page.items;
    if (!items.length) { list.replaceChildren(empty('No autoscaler policy yet: create one below.')); return; }
    // The spaces' names, read once each.
    for (const id of new Set(items.map(p => p.space_id))) {
      if (!names.has(id)) names.set(id, await api.get(`/spaces/${id}`).then(sp => sp.name, () => null));
    }
    list.replaceChildren(h('table', { class: 'stack', id: 'pol-table' },
      h('thead', null, h('tr', null, ['Workload', 'Space', 'Replicas', 'State', 'Updated', 'Actions'].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, items.map(p => h('tr', { 'data-policy': p.id, 'data-state': p.state },
        h('td', { 'data-label': 'Workload' }, h('code', null, `${p.target.namespace}/${p.target.name}`), ' ', h('span', { class: 'muted' }, p.target.kind)),
        h('td', { 'data-label': 'Space' }, names.get(p.space_id) ? h('a', { href: `#/spaces/${p.space_id}` }, names.get(p.space_id)) : h('span', { class: 'muted' }, `deregistered space ${p.space_id.slice(0, 8)}…`)),
        h('td', { 'data-label': 'Replicas' }, `${p.min_replicas}–${p.max_replicas}`),
        h('td', { 'data-label': 'State' }, h('span', { class: `badge s-${p.state === 'applied' ? 'active' : 'inactive'}` }, p.state), p.state_reason ? h('span', { class: 'reason' }, p.state_reason) : null),
        h('td', { 'data-label': 'Updated' }, when(p.updated_at)),
        h('td', { 'data-label': 'Actions' }, deleteControl(p, api, confirming, reload)))))));
  }
  // One request a tick: the list with its ETag (mostly 304s).
  const tick = rotation(api, [{ path: () => '/autoscaler-policies?limit=100', changed: draw }]);
  async function reload() { await draw(await api.get('/autoscaler-policies?limit=100')); }
  await ctx.every(async () => {
    try { await tick(); refreshAges(root); } catch (x) { list.replaceChildren(errorBox(x, 'The policies could not be loaded')); }
  });
}

// deleteControl asks once more in place, then deletes the policy at the
// version listed (If-Match): a policy changed since the list was drawn
// answers 412 and is not deleted; its failure stays in the row until the
// next click.
function deleteControl(p, api, confirming, done) {
  const box = h('div', { class: 'row' });
  const out = h('div');
  const what = `${p.target.kind} ${p.target.namespace}/${p.target.name}`;
  const ask = () => {
    confirming.delete(p.id);
    const b = h('button', { type: 'button', 'data-delete': p.id, 'aria-label': `Delete the policy of ${what}` }, 'Delete');
    b.addEventListener('click', () => confirmIt(true));
    box.replaceChildren(b, out);
  };
  const confirmIt = focus => {
    confirming.add(p.id);
    const yes = h('button', { type: 'button', class: 'danger', 'data-delete-confirm': p.id }, 'Delete it');
    const no = h('button', { type: 'button', 'data-delete-cancel': p.id }, 'Cancel');
    no.addEventListener('click', ask);
    yes.addEventListener('click', async () => {
      yes.disabled = true;
      out.replaceChildren();
      try {
        await api.del(`/autoscaler-policies/${p.id}`, { 'If-Match': `"${p.version}"` });
        confirming.delete(p.id);
        flash(`Policy for ${what} deleted.`);
        await done();
      } catch (x) {
        yes.disabled = false;
        out.replaceChildren(errorBox(x, 'The policy was not deleted'));
      }
    });
    box.replaceChildren(h('p', null, p.state === 'applied' ? `Spaces stops applying it to ${what}; the cloud-side policy is left as it is.` : 'It is no longer applied; its record goes.'), yes, no, out);
    if (focus) yes.focus();
  };
  if (confirming.has(p.id)) confirmIt(false); else ask();
  return box;
}
