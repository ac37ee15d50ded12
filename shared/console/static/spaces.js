// Spaces: the fleet list (counts, filters, cursor paging, polling with
// ETags) and one space's detail (identity, probe, history chart,
// namespaces, bindings, deregistration).
import { h, badge, providerMark, when, ago, region, errorBox, field, empty, flash, showFieldErrors, validate, patterned, tombstoneOf, PATTERNS, PROVIDERS } from './ui.js';
import { qs } from './api.js';
import { RANGES, segments, chart } from './chart.js';

const PAGE = 50;

function hashParams() {
  const i = location.hash.indexOf('?');
  return new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
}

export async function spacesList(root, _, ctx) {
  const { api } = ctx;
  const params = hashParams();
  const filter = { provider: params.get('provider') || '', status: params.get('status') || '', cloud_account_id: params.get('account') || '' };
  let cursors = [''];            // cursors of the pages before and including this one
  let page = null;               // the page in view
  let counts = null;             // {active, inactive, unknown, total}
  let ticks = 0;

  const countsEl = h('ul', { class: 'counts', 'aria-label': 'Spaces per status' });
  const tbody = h('tbody');
  const table = h('table', { class: 'stack', id: 'spaces-table' },
    h('caption', { class: 'sr' }, 'Registered spaces'),
    h('thead', null, h('tr', null, ['Name', 'Provider', 'Region', 'Status', 'Last probed', 'Server version'].map(t => h('th', { scope: 'col' }, t)))), tbody);
  const body = h('div', null, h('p', { class: 'loading' }, 'Loading spaces…'));
  const pager = h('div', { class: 'pager' });
  const updated = h('p', { class: 'muted', id: 'updated' });
  const error = h('div');

  const sel = (id, label, value, options) => {
    const el = h('select', { id, name: id }, options.map(([v, t]) => h('option', { value: v, selected: v === value }, t)));
    el.addEventListener('change', () => {
      const p = new URLSearchParams({ provider: provSel.value, status: statSel.value, account: acctSel.value });
      for (const [k, v] of [...p]) if (!v) p.delete(k);
      ctx.go('#/spaces' + (p.toString() ? '?' + p : ''));
    });
    return field(label, el);
  };
  const provSel = sel('f-provider', 'Provider', filter.provider, [['', 'All providers'], ...Object.entries(PROVIDERS)]).querySelector('select');
  const statSel = sel('f-status', 'Status', filter.status, [['', 'All statuses'], ['active', 'active'], ['inactive', 'inactive'], ['unknown', 'unknown']]).querySelector('select');
  const acctSel = sel('f-account', 'Cloud account', filter.cloud_account_id, [['', 'All accounts']]).querySelector('select');
  api.all('/cloud-accounts').then(accts => {
    for (const a of accts) acctSel.append(h('option', { value: a.id, selected: a.id === filter.cloud_account_id }, `${a.name} (${PROVIDERS[a.provider]})`));
  }).catch(() => {});

  root.replaceChildren(
    h('h1', null, 'Spaces', h('span', { class: 'spacer' }), h('a', { class: 'button primary', href: '#/connect' }, 'Register a cluster')),
    countsEl,
    h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter spaces', onsubmit: e => e.preventDefault() },
      provSel.closest('.field'), statSel.closest('.field'), acctSel.closest('.field')),
    error, body, pager, updated);

  const pagePath = () => '/spaces' + qs({ ...filter, limit: String(PAGE), cursor: cursors[cursors.length - 1] });

  function renderCounts() {
    const c = counts || { active: '…', inactive: '…', unknown: '…', total: '…' };
    const note = filter.status ? ' (all statuses, same provider and account)' : '';
    countsEl.replaceChildren(
      h('li', { 'data-count': 'total' }, h('b', null, String(c.total)), 'spaces' + note),
      ...['active', 'inactive', 'unknown'].map(k => h('li', { 'data-count': k },
        h('b', null, String(c[k])), h('span', { class: `badge s-${k}` }, k))));
  }

  function renderRows() {
    if (!page.items.length) {
      const filtered = filter.provider || filter.status || filter.cloud_account_id;
      body.replaceChildren(filtered
        ? empty('No space matches these filters.', h('a', { href: '#/spaces' }, 'Clear the filters'))
        : empty('No space is registered yet. Connect a cloud account, pick one of its clusters, and register it.', h('a', { class: 'button primary', href: '#/connect' }, 'Connect a cloud account')));
    } else {
      tbody.replaceChildren(...page.items.map(sp => h('tr', { 'data-space': sp.id, 'data-name': sp.name },
        h('td', { 'data-label': 'Name' }, h('a', { href: `#/spaces/${sp.id}` }, sp.name), sp.synthetic ? h('span', { class: 'reason' }, 'synthetic') : null),
        h('td', { 'data-label': 'Provider' }, providerMark(sp.provider)),
        h('td', { 'data-label': 'Region' }, region(sp)),
        h('td', { 'data-label': 'Status' }, badge(sp.status, sp.probe && sp.probe.reason)),
        h('td', { 'data-label': 'Last probed' }, when(sp.probe && sp.probe.last_probe_at)),
        h('td', { 'data-label': 'Version' }, (sp.probe && sp.probe.server_version && sp.probe.server_version.gitVersion) || '—'))));
      if (body.firstChild !== table) body.replaceChildren(table);
    }
    const n = cursors.length;
    const prev = h('button', { type: 'button', disabled: n === 1 }, '← Previous');
    prev.addEventListener('click', () => { cursors.pop(); page = null; refresh(); });
    const next = h('button', { type: 'button', disabled: !page.next_cursor }, 'Next →');
    next.addEventListener('click', () => { cursors.push(page.next_cursor); page = null; refresh(); });
    pager.replaceChildren(prev, h('span', null, `Page ${n}`), next);
    pager.hidden = n === 1 && !page.next_cursor;
  }

  // countAll walks the fleet (with the provider and account filters) to
  // count per status. A single page that is the whole fleet counts itself.
  async function countAll() {
    const c = { active: 0, inactive: 0, unknown: 0, total: 0 };
    let items;
    if (!filter.status && cursors.length === 1 && !page.next_cursor) items = page.items;
    else items = await api.all('/spaces' + qs({ provider: filter.provider, cloud_account_id: filter.cloud_account_id }));
    for (const sp of items) { c[sp.status]++; c.total++; }
    counts = c;
    renderCounts();
  }

  async function refresh() {
    try {
      const r = await api.poll(pagePath());
      error.replaceChildren();
      const changed = r.changed || !page;
      page = r.data;
      if (changed) renderRows();
      else for (const t of root.querySelectorAll('time[datetime]')) t.textContent = ago(t.getAttribute('datetime')); // ages move on
      ticks++;
      // Counts follow the page in view at once, and the rest of the fleet
      // every sixth tick, so a tick of an unchanged fleet costs one 304.
      if (changed || counts === null || ticks % 6 === 0) await countAll();
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every ${ctx.cfg.refresh_seconds || 5} s`;
    } catch (x) {
      error.replaceChildren(errorBox(x, 'The spaces could not be loaded'));
    }
  }
  renderCounts();
  await ctx.every(refresh);
}

// ---- detail ----------------------------------------------------------------

export async function spaceDetail(root, [id], ctx) {
  const { api } = ctx;
  let sp;
  try { sp = await api.get(`/spaces/${id}`); } catch (x) {
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
  const bindings = h('div', { class: 'card', id: 'bindings' });
  const error = h('div');
  root.replaceChildren(head, error, h('div', { class: 'grid' }, identity, probe), history, h('div', { class: 'grid' }, namespaces, bindings));

  let envs = [], policies = [];
  const deregBtn = h('button', { class: 'danger', type: 'button', id: 'deregister' }, 'Deregister…');
  deregBtn.addEventListener('click', () => confirmDeregister(sp, envs, policies, ctx));

  // The heading is built once (its button must stay the same element
  // while the page refreshes); only the badge and the message change.
  const headBadge = h('span');
  const headMsg = h('div');
  head.append(h('p', null, h('a', { href: '#/spaces' }, '← All spaces')),
    h('h1', null, providerMark(sp.provider, false), sp.name, headBadge, h('span', { class: 'spacer' }), deregBtn), headMsg);

  function renderHead() {
    headBadge.replaceChildren(badge(sp.status, sp.probe && sp.probe.reason));
    headMsg.replaceChildren();
    if (sp.status !== 'active' && sp.probe && sp.probe.message) headMsg.append(h('div', { class: 'alert warn' }, sp.probe.message));
    const cfg = Object.entries(sp.config).map(([k, v]) => [k, v]);
    identity.replaceChildren(h('h2', null, 'Identity'), h('dl', { class: 'kv' },
      kv('Provider', PROVIDERS[sp.provider]), kv('Type', sp.space_type), ...cfg.map(([k, v]) => kv(k, h('code', null, v))),
      kv('Cloud account', h('a', { href: `#/accounts/${sp.cloud_account_id}/clusters` }, sp.cloud_account_id)),
      kv('Synthetic', sp.synthetic ? 'yes' : 'no'), kv('Registered', when(sp.created_at)), kv('Space id', h('code', null, sp.id))));
    const p = sp.probe || {};
    probe.replaceChildren(h('h2', null, 'Last probe'), h('dl', { class: 'kv' },
      kv('Status', badge(sp.status, p.reason)), kv('Last probed', when(p.last_probe_at)), kv('Last success', when(p.last_success_at)),
      kv('Status since', when(p.last_transition_at)), kv('Latency', p.latency_ms !== undefined ? `${p.latency_ms} ms` : '—'),
      kv('Consecutive failures', String(p.consecutive_failures)),
      kv('Server version', p.server_version ? `${p.server_version.gitVersion} (${p.server_version.platform})` : '—'),
      p.message ? kv('Message', p.message) : null));
  }

  async function loadHistory() {
    const now = Date.now(), from = now - RANGES[range];
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
      chart(segments(items, sp, from, now), from, now, range === '24h' ? '24 hours' : range.replace('d', ' days')),
      h('details', null, h('summary', null, `${recent.length} change${recent.length === 1 ? '' : 's'} in this range`),
        recent.length ? h('table', null, h('thead', null, h('tr', null, ['When', 'From', 'To', 'Reason'].map(t => h('th', { scope: 'col' }, t)))),
          h('tbody', null, recent.map(t => h('tr', null, h('td', null, new Date(t.at).toLocaleString()), h('td', null, t.from), h('td', null, t.to),
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
    const labels = {};
    const bad = [];
    for (const part of nsLabels.value.split(',').map(x => x.trim()).filter(Boolean)) {
      const [k, ...v] = part.split('=');
      labels[k.trim()] = v.join('=').trim();
      if (!new RegExp(PATTERNS.labelKey[0]).test(k.trim()) || k.trim().length > 317) bad.push({ field: 'labels', reason: PATTERNS.labelKey[1] });
      else if (!new RegExp(PATTERNS.labelValue[0]).test(labels[k.trim()])) bad.push({ field: 'labels', reason: PATTERNS.labelValue[1] });
    }
    try {
      const invalid = validate(nsForm, bad.slice(0, 1));
      if (invalid) throw invalid;
      await api.post(`/space-discovery/${id}/namespaces`, Object.keys(labels).length ? { name: nsName.value.trim(), labels } : { name: nsName.value.trim() });
      nsErr.replaceChildren(); showFieldErrors(nsForm, null);
      flash(`Namespace ${nsName.value.trim()} created.`);
      nsForm.reset();
      await loadNamespaces();
    } catch (x) {
      const rest = showFieldErrors(nsForm, x);
      nsErr.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The namespace was not created') : '');
    }
  });
  namespaces.replaceChildren(h('h2', null, 'Namespaces'), nsBody, nsForm);

  async function loadNamespaces() {
    try {
      const list = await api.get(`/space-discovery/${id}/namespaces`);
      nsBody.replaceChildren(list.items.length ? h('table', { id: 'ns-table' }, h('thead', null, h('tr', null, ['Name', 'Phase', 'Labels'].map(t => h('th', { scope: 'col' }, t)))),
        h('tbody', null, list.items.map(n => h('tr', { 'data-ns': n.name }, h('td', null, n.name), h('td', null, n.phase || '—'),
          h('td', null, Object.entries(n.labels).filter(([k]) => !k.startsWith('kubernetes.io/')).map(([k, v]) => `${k}=${v}`).join(', ') || '—')))))
        : empty('The cluster has no namespace.'));
    } catch (x) {
      nsBody.replaceChildren(errorBox(x, 'The cluster’s namespaces could not be listed'));
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
  await Promise.all([loadHistory(), loadNamespaces(), loadBindings().catch(x => bindings.replaceChildren(errorBox(x, 'Bindings could not be loaded')))]);
  let lastVersion = sp.version;
  await ctx.every(async () => {
    try {
      sp = await api.get(`/spaces/${id}`);
      error.replaceChildren();
      renderHead();
      if (sp.version !== lastVersion) { lastVersion = sp.version; await loadHistory(); }
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
