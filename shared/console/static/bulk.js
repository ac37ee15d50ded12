// Bulk work on the spaces list: the rows selected (by their checkboxes, or
// every space matching the filter) get a label set or removed, or are
// deregistered, one request per space from this page, at most CONCURRENCY
// out at once, each row's result shown.
//
// There is no batch route: each row is the API's own single-space write,
// which is idempotent by its definition, so running the action again (a
// retry after a failure, a double click) never does anything twice. A
// label change sends the space's whole set with If-Match (the version the
// row was read at): a space whose labels changed meanwhile answers 412 and
// is read again and merged, never overwritten; a set that already holds
// the change is not sent at all. A deregistration already done answers
// 404 with the space's tombstone, reported as such. docs/console.md says
// why and counts the requests.
import { h, errorBox, flash, tombstoneOf, PATTERNS } from './ui.js';
import { pool } from './api.js';

// CONCURRENCY bounds the writes out at once: enough to overlap the
// round trips, few enough not to crowd the API's throttle (429) or the
// browser's six connections per host that the page's polls share.
export const CONCURRENCY = 4;

// WALK bounds the pages "all matching" reads (100 spaces each).
const WALK = 1000;

// relabel applies change (labels -> labels) to one space: no request when
// the set already holds it; else PUT with If-Match, and on 412 the space
// is read again and the change applied to what it holds now (at most
// three times).
async function relabel(api, sp, change) {
  let cur = sp;
  for (let attempt = 0; ; attempt++) {
    const next = change({ ...(cur.labels || {}) });
    if (sameLabels(next, cur.labels || {})) return { kind: 'unchanged', text: 'already so: nothing sent' };
    try {
      const out = await api.put(`/spaces/${sp.id}/labels`, { labels: next }, { 'If-Match': `"${cur.version}"` });
      return { kind: 'done', text: 'labels saved', space: out };
    } catch (x) {
      if (tombstoneOf(x) || x.status === 404) return { kind: 'gone', text: 'deregistered meanwhile' };
      if (x.status !== 412 || attempt >= 2) throw x;
      cur = await api.get(`/spaces/${sp.id}`);
    }
  }
}

function sameLabels(a, b) {
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every(k => Object.prototype.hasOwnProperty.call(b, k) && b[k] === a[k]);
}

async function deregister(api, sp) {
  try {
    await api.del(`/spaces/${sp.id}`);
    return { kind: 'done', text: 'deregistered' };
  } catch (x) {
    const ts = tombstoneOf(x);
    if (ts) return { kind: 'gone', text: 'already deregistered' + (ts.deregistered_by ? ` by ${ts.deregistered_by}` : '') };
    throw x;
  }
}

// bulkWork is the bar above the list. selected maps a space's id to the
// space as listed; hooks: total() (how many match the filter, or null),
// path() (the filter's listing, for "all matching"), changed() (the
// selection changed here: redraw the checkboxes), done() (the spaces
// changed: read the rows again).
export function bulkWork(ctx, selected, hooks) {
  const { api } = ctx;
  const count = h('strong', { id: 'bulk-count' });
  const all = h('button', { type: 'button', id: 'bulk-all', class: 'link' });
  const clear = h('button', { type: 'button', id: 'bulk-clear', class: 'link' }, 'Clear the selection');
  const label = h('input', { id: 'bulk-label', name: 'bulk-label', autocomplete: 'off', spellcheck: 'false', maxlength: 317 + 64,
    placeholder: 'key=value (set) or key (remove)', 'aria-label': 'Label to set (key=value) or remove (key)' });
  const set = h('button', { type: 'submit', id: 'bulk-set' }, 'Set label');
  const remove = h('button', { type: 'button', id: 'bulk-remove' }, 'Remove label');
  const dereg = h('button', { type: 'button', id: 'bulk-deregister', class: 'danger' }, 'Deregister…');
  const note = h('div', { id: 'bulk-note', role: 'status' });
  const results = h('div', { id: 'bulk-results' });
  const form = h('form', { class: 'row', 'aria-label': 'Change the selected spaces', novalidate: true }, label, set, remove, dereg);
  const el = h('section', { class: 'card bulk', id: 'bulk', 'aria-label': 'Selected spaces', hidden: true },
    h('div', { class: 'row' }, count, all, clear), form, note, results);
  let busy = false;

  function update() {
    const n = selected.size, t = hooks.total();
    count.textContent = `${n} selected`;
    all.hidden = busy || (t !== null && n >= t);
    all.textContent = t !== null ? `Select all ${t} matching this filter` : 'Select all matching this filter';
    for (const b of [set, remove, dereg, all, clear]) b.disabled = busy;
    for (const b of [set, remove, dereg]) if (!n) b.disabled = true;
    el.hidden = !n && !results.firstChild && !busy;
  }

  all.addEventListener('click', async () => {
    busy = true; update();
    note.replaceChildren(h('p', { class: 'muted' }, 'Reading the matching spaces…'));
    try {
      const items = await api.all(hooks.path(), WALK, k => { note.firstChild.textContent = `Reading the matching spaces… ${k}`; });
      for (const sp of items) selected.set(sp.id, sp);
      note.replaceChildren();
    } catch (x) {
      note.replaceChildren(errorBox(x, 'The matching spaces could not be read'));
    }
    busy = false; update(); hooks.changed();
  });
  clear.addEventListener('click', () => { selected.clear(); results.replaceChildren(); note.replaceChildren(); update(); hooks.changed(); });

  // labelChange reads the box: "k=v" sets, "k" removes; null (and the
  // reason shown) when it is not a Kubernetes label.
  function labelChange(removing) {
    const text = label.value.trim();
    const i = text.indexOf('=');
    const key = (i < 0 ? text : text.slice(0, i)).trim(), value = i < 0 ? '' : text.slice(i + 1).trim();
    let bad = '';
    if (!key) bad = removing ? 'Name the label to remove: its key.' : 'Write the label to set: key=value.';
    else if (!new RegExp(PATTERNS.labelKey[0]).test(key) || key.length > 317) bad = PATTERNS.labelKey[1];
    else if (removing && i >= 0) bad = 'To remove a label, write its key alone.';
    else if (!removing && i < 0) bad = 'To set a label, write key=value.';
    else if (!new RegExp(PATTERNS.labelValue[0]).test(value)) bad = PATTERNS.labelValue[1];
    if (bad) {
      label.setAttribute('aria-invalid', 'true');
      note.replaceChildren(h('p', { class: 'err', id: 'bulk-label-err' }, bad));
      label.focus();
      return null;
    }
    label.removeAttribute('aria-invalid');
    return removing ? { what: `remove ${key}`, fn: l => { delete l[key]; return l; } } : { what: `set ${key}=${value}`, fn: l => { l[key] = value; return l; } };
  }
  label.addEventListener('input', () => { if (label.hasAttribute('aria-invalid')) { label.removeAttribute('aria-invalid'); note.replaceChildren(); } });

  // run does one write per selected space, CONCURRENCY at a time, and
  // shows each one's result, failures first.
  async function run(what, write) {
    const items = [...selected.values()];
    busy = true; update();
    results.replaceChildren();
    note.replaceChildren(h('p', { class: 'muted' }, `Working on ${items.length} space${items.length === 1 ? '' : 's'}…`));
    const out = await pool(items, CONCURRENCY, sp => write(sp));
    const rows = items.map((sp, i) => out[i] instanceof Error ? { sp, kind: 'failed', err: out[i] } : { sp, ...out[i] });
    for (const r of rows) {
      if (r.space) selected.set(r.sp.id, r.space);
      if (r.kind !== 'failed' && what === 'deregister') selected.delete(r.sp.id);
    }
    const n = k => rows.filter(r => r.kind === k).length;
    const failed = n('failed');
    const summary = what === 'deregister'
      ? `Deregister: ${n('done')} deregistered, ${n('gone')} already deregistered, ${failed} failed.`
      : `Labels (${what}): ${n('done')} changed, ${n('unchanged')} already so, ${n('gone')} deregistered meanwhile, ${failed} failed.`;
    rows.sort((a, b) => (b.kind === 'failed') - (a.kind === 'failed'));
    results.replaceChildren(h('p', { id: 'bulk-summary', role: 'status', 'data-failed': String(failed) }, summary,
      failed ? ' The failed ones stay selected: run it again to retry them (what is done is not done twice).' : ''),
      h('details', { open: failed > 0 || rows.length <= 20 }, h('summary', null, 'Result per space'),
        h('table', { class: 'stack', id: 'bulk-result-table' }, h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Space'), h('th', { scope: 'col' }, 'Result'))),
          h('tbody', null, rows.map(r => h('tr', { 'data-result-space': r.sp.id, 'data-result': r.kind },
            h('td', { 'data-label': 'Space' }, what === 'deregister' && r.kind !== 'failed' ? r.sp.name : h('a', { href: `#/spaces/${r.sp.id}` }, r.sp.name)),
            h('td', { 'data-label': 'Result' }, r.kind === 'failed' ? errorBox(r.err, 'Failed') : r.text)))))));
    note.replaceChildren();
    busy = false; update(); hooks.changed();
    flash(summary, failed ? 'warn' : 'info');
    hooks.done();
  }

  form.addEventListener('submit', e => {
    e.preventDefault();
    const c = labelChange(false);
    if (c) run(c.what, sp => relabel(api, sp, c.fn));
  });
  remove.addEventListener('click', () => {
    const c = labelChange(true);
    if (c) run(c.what, sp => relabel(api, sp, c.fn));
  });
  dereg.addEventListener('click', async () => {
    busy = true; update();
    note.replaceChildren(h('p', { class: 'muted' }, 'Reading what the deregistration would touch…'));
    let envs, policies;
    try {
      [envs, policies] = await Promise.all([api.all('/environments'), api.all('/autoscaler-policies')]);
      note.replaceChildren();
    } catch (x) {
      note.replaceChildren(errorBox(x, 'What the deregistration would touch could not be read'));
      busy = false; update();
      return;
    }
    busy = false; update();
    const items = [...selected.values()];
    confirmBulk(items, envs.filter(e => selected.has(e.space_id)), policies.filter(p => selected.has(p.space_id)),
      () => run('deregister', sp => deregister(api, sp)));
  });

  update();
  return { el, update, reset() { results.replaceChildren(); note.replaceChildren(); update(); } };
}

// confirmBulk sums the cascade of deregistering every space of items, as
// the single space's confirmation lists it, before asking.
function confirmBulk(items, envs, policies, yes) {
  const names = new Map(items.map(sp => [sp.id, sp.name]));
  const live = envs.filter(e => !e.gate);
  const applied = policies.filter(p => p.state === 'applied');
  const dlg = h('dialog', { id: 'bulk-dialog', 'aria-labelledby': 'bulk-title' });
  const ok = h('button', { class: 'danger', type: 'button', id: 'bulk-confirm' }, `Deregister ${items.length} space${items.length === 1 ? '' : 's'}`);
  const no = h('button', { type: 'button', autofocus: true }, 'Cancel');
  const shown = items.slice(0, 10).map(sp => sp.name).join(', ') + (items.length > 10 ? ` and ${items.length - 10} more` : '');
  dlg.append(h('h2', { id: 'bulk-title' }, `Deregister ${items.length} space${items.length === 1 ? '' : 's'}?`),
    h('p', null, shown, '. The clusters themselves are not touched. Deregistering will:'),
    h('ul', { id: 'bulk-cascade' },
      h('li', { 'data-envs': String(live.length) }, live.length ? [`gate ${live.length} environment${live.length > 1 ? 's' : ''} with “Space deregistered”: `,
        live.map(e => `${e.name} (on ${names.get(e.space_id)})`).join(', '), ' (they take no new deployments until re-bound to another space)'] : 'gate no environment (none is bound)'),
      h('li', { 'data-policies': String(applied.length) }, applied.length ? [`stop applying ${applied.length} autoscaler polic${applied.length > 1 ? 'ies' : 'y'}: `,
        applied.map(p => `${p.target.namespace}/${p.target.kind}/${p.target.name} (on ${names.get(p.space_id)})`).join(', '), ' (the cloud-side policies are left as they are)'] : 'stop no autoscaler policy (none is applied)'),
      h('li', null, 'move revisions still queued for them to the dead-letter queue at their next claim'),
      h('li', null, `remove ${items.length === 1 ? 'the credential grant' : `the ${items.length} credential grants`}: no kubeconfig can be minted for these clusters any more`),
      h('li', null, 'leave deployments already running on the clusters running')),
    h('p', { class: 'muted' }, `One request per space, ${CONCURRENCY} at a time; each space's result is shown. Registering a cluster again later creates a new space with a new id.`),
    h('div', { class: 'row' }, ok, no));
  document.body.append(dlg);
  const close = () => { dlg.close(); dlg.remove(); };
  no.addEventListener('click', close);
  dlg.addEventListener('cancel', () => dlg.remove());
  ok.addEventListener('click', () => { close(); yes(); });
  dlg.showModal();
}
