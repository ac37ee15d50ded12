// Cloud accounts: connect one (with the trust setup the customer does in
// their cloud), then pick one of its clusters and register it.
//
// Each provider's connection fields are described once in CONNECTIONS. The
// trust setup is not: Spaces generates it for the org when the account is
// created (its external id, principal, audience), so the console shows only
// the account's own setup (setupCard), never a text of its own that could
// disagree with it.
import { h, providerMark, errorBox, field, empty, flash, showFieldErrors, when, validate, patterned, PROVIDERS, AWS_REGIONS, bootstraps } from './ui.js';
import { qs } from './api.js';

const CONNECTIONS = {
  aws: {
    fields: [
      ['roleArn', 'IAM role ARN', 'arn:aws:iam::123456789012:role/spaces-access', 'The role Spaces assumes in your account.', 'roleArn'],
    ],
  },
  gcp: {
    fields: [
      ['projectId', 'Project id', 'acme-prod', 'The project that holds the clusters.', 'projectId'],
      ['serviceAccountEmail', 'Service account', 'spaces@acme-prod.iam.gserviceaccount.com', 'The service account Spaces impersonates.', 'serviceAccountEmail'],
    ],
  },
  azure: {
    fields: [
      ['tenantId', 'Tenant id', '00000000-0000-0000-0000-000000000000', 'Your Entra ID tenant.', 'uuid'],
      ['clientId', 'Application (client) id', '00000000-0000-0000-0000-000000000000', 'The Entra application Spaces federates into.', 'uuid'],
      ['subscriptionId', 'Subscription id', '00000000-0000-0000-0000-000000000000', 'The subscription that holds the clusters.', 'uuid'],
    ],
  },
};

function identity(a) {
  const c = a.connection;
  return a.provider === 'aws' ? c.roleArn : a.provider === 'gcp' ? `${c.serviceAccountEmail}` : `subscription ${c.subscriptionId}`;
}

export async function accounts(root, _, ctx) {
  const { api } = ctx;
  const list = h('div', null, h('p', { class: 'loading' }, 'Loading accounts…'));
  let provider = 'aws';
  const radios = h('fieldset', { class: 'row' }, h('legend', null, 'Cloud'), Object.keys(PROVIDERS).map(p => {
    const r = h('input', { type: 'radio', name: 'provider', id: `prov-${p}`, value: p, checked: p === provider });
    r.addEventListener('change', () => { provider = p; renderFields(); });
    return h('label', { for: `prov-${p}`, class: 'row' }, r, providerMark(p));
  }));
  const name = h('input', { id: 'acct-name', name: 'name', required: true, maxlength: 100, 'data-field': 'name', autocomplete: 'off' });
  const fieldsBox = h('div');
  const err = h('div');
  const inputs = {};
  const demo = h('div');

  function renderFields() {
    const spec = CONNECTIONS[provider];
    for (const k of Object.keys(inputs)) delete inputs[k];
    fieldsBox.replaceChildren(...spec.fields.map(([key, label, ph, hint, pattern]) => {
      const el = patterned({ id: `conn-${key}`, name: key, required: true, placeholder: ph, 'data-field': `connection.${key}` }, pattern);
      inputs[key] = el;
      return field(label, el, hint);
    }));
    const d = ctx.cfg.demo_connections && ctx.cfg.demo_connections[provider];
    demo.replaceChildren(d ? (() => {
      const b = h('button', { type: 'button', class: 'link', id: 'use-demo' }, `Use the local demo ${PROVIDERS[provider]} account`);
      b.addEventListener('click', () => { for (const [k, v] of Object.entries(d)) if (inputs[k]) inputs[k].value = v; if (!name.value) name.value = `demo ${provider}`; });
      return h('p', null, b);
    })() : '');
  }

  const form = h('form', { class: 'card', id: 'connect-form', 'aria-labelledby': 'connect-title', novalidate: true },
    h('h2', { id: 'connect-title' }, 'Connect a cloud account'),
    h('p', { class: 'muted', id: 'connect-intro' }, 'Spaces holds no cloud secret: it federates into an identity you grant. Name the identity here and connect; Spaces then shows the exact steps that make your cloud trust this org, and only it, and verifies them.'),
    radios, field('Name', name, 'How this account is shown here.'), demo, fieldsBox,
    err, h('button', { class: 'primary', type: 'submit' }, 'Connect'));
  // The same identity connected twice is asked about once: the first
  // submit names the account that has it, the second connects anyway.
  let accts = [], again = '';
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const connection = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
    try {
      const bad = validate(form);
      if (bad) throw bad;
      const sig = JSON.stringify([provider, connection]);
      const same = accts.find(a => a.provider === provider && Object.entries(connection).every(([k, v]) => (a.connection || {})[k] === v));
      if (same && again !== sig) {
        again = sig;
        err.replaceChildren(h('div', { class: 'alert warn', role: 'alert', id: 'dup-warning' },
          'This identity is already connected as ', h('a', { href: `#/accounts/${same.id}/clusters` }, same.name),
          '. Connecting it again makes a second account for the same identity; submit again to do so.'));
        return;
      }
      const a = await api.post('/cloud-accounts', { provider, name: name.value.trim(), connection });
      flash(a.status === 'ready' ? `${a.name} connected. Pick a cluster to register.` : `${a.name} created: do the setup steps in your cloud, then verify.`);
      ctx.go(`#/accounts/${a.id}/clusters`);
    } catch (x) {
      const rest = showFieldErrors(form, x);
      err.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The account was not connected') : h('p', { class: 'err', role: 'alert' }, 'Fix the fields marked above.'));
    }
  });
  renderFields();
  root.replaceChildren(h('h1', null, 'Cloud accounts'), h('div', { class: 'card' }, h('h2', null, 'Connected accounts'), list), form);

  accts = await api.all('/cloud-accounts');
  // Disconnect: the API refuses (409, with why) while a space uses it.
  // Asked once more in place before anything is sent.
  const disconnect = a => {
    const box = h('div', { class: 'disconnect' });
    const ask = () => {
      const b = h('button', { type: 'button', 'data-disconnect': a.id, 'aria-label': `Disconnect ${a.name}` }, 'Disconnect');
      b.addEventListener('click', confirmIt);
      box.replaceChildren(b);
    };
    const confirmIt = () => {
      const yes = h('button', { type: 'button', class: 'danger', 'data-disconnect-confirm': a.id }, `Disconnect ${a.name}`);
      const no = h('button', { type: 'button' }, 'Cancel');
      const out = h('div');
      no.addEventListener('click', ask);
      yes.addEventListener('click', async () => {
        yes.disabled = true;
        try {
          await api.del(`/cloud-accounts/${a.id}`);
          box.closest('tr').remove();
          flash(`${a.name} disconnected.`);
        } catch (x) { yes.disabled = false; out.replaceChildren(errorBox(x, `${a.name} was not disconnected`)); }
      });
      box.replaceChildren(h('p', null, 'Spaces forgets the account; the identity in your cloud is left as it is.'), h('div', { class: 'row' }, yes, no), out);
      yes.focus();
    };
    ask();
    return box;
  };
  list.replaceChildren(accts.length ? h('table', { class: 'stack', id: 'accounts-table' },
    h('thead', null, h('tr', null, ['Name', 'Cloud', 'Identity', 'Trust', 'Connected', '', ''].map(t => h('th', { scope: 'col' }, t)))),
    h('tbody', null, accts.map(a => h('tr', { 'data-account': a.id },
      h('td', { 'data-label': 'Name' }, a.name), h('td', { 'data-label': 'Cloud' }, providerMark(a.provider)),
      h('td', { 'data-label': 'Identity' }, h('code', null, identity(a))), h('td', { 'data-label': 'Trust' }, a.status + (a.status_reason ? ` (${a.status_reason})` : '')),
      h('td', { 'data-label': 'Connected' }, when(a.created_at)),
      h('td', null, h('a', { href: `#/accounts/${a.id}/clusters` }, a.status === 'ready' ? 'Pick a cluster' : 'Set up and verify')),
      h('td', { 'data-label': '' }, disconnect(a))))))
    : empty('No cloud account is connected yet: connect one below.'));
}

// A setup step the customer runs in a shell starts with a cloud's CLI; any
// other step is an instruction, shown as prose. The server's verify step
// (curl … /verify with a bearer token) is the API's way to verify: the
// console has its button instead, and shows no token.
const COMMAND = /^(aws|gcloud|az|kubectl) /;

// cloudStatus says a cluster's state in one vocabulary whatever its cloud
// (GKE's status, AKS's provisioning state; EKS's listing says none), the
// cloud's own word kept as the title.
const CLOUD_STATES = { RUNNING: 'ready', Succeeded: 'ready', PROVISIONING: 'creating', Creating: 'creating', RECONCILING: 'updating', Updating: 'updating',
  STOPPING: 'deleting', Deleting: 'deleting', ERROR: 'failed', Failed: 'failed', DEGRADED: 'degraded', Canceled: 'canceled' };
function cloudStatus(provider, status) {
  if (!status) return h('span', { class: 'muted', 'data-cloud-status': 'not reported' }, provider === 'aws' ? 'not reported (EKS lists no state)' : 'not reported');
  const word = CLOUD_STATES[status] || status.toLowerCase();
  return h('span', { 'data-cloud-status': word, title: `The cloud says ${status}` }, word);
}
const API_VERIFY = /\/cloud-accounts\/[^/\s]+\/verify\b|\$TOKEN/;

// After a refused verify the card checks again by itself while it is open
// (IAM changes reach every region only after a while, AWS: "Changes that I
// make are not always immediately visible",
// https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html#troubleshoot_general_eventual-consistency),
// 10 s, 20 s, 40 s, then every 60 s, at most RECHECKS times; never when the
// refusal says the setup itself is wrong, which waiting does not mend.
const RECHECKS = 6;
const WRONG_SETUP = new Set(['ExternalIdNotRequired', 'TrustNotOrgBound', 'ReverificationRequired']);

function copyButton(text, label, id) {
  const b = h('button', { type: 'button', class: 'copy-step', id, 'aria-label': label }, 'Copy');
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(text); flash('Copied.'); } catch { flash('Copying was refused: select the text and copy it.', 'warn'); }
  });
  return b;
}

function statusLine(a) {
  // NotVerified's message is written for API users (it names the verify
  // route): the card says it in its own words.
  const detail = a.status_reason === 'NotVerified' ? ': not verified yet' : (a.status_reason ? ` (${a.status_reason})` : '') + (a.status_message ? ` — ${a.status_message}` : '');
  return `Status: ${a.status}${detail}`;
}

// setupCard shows what the customer sets up in their cloud for this org's
// identity, built from the account's setup alone (generated by Spaces), as
// numbered steps each with its copy button, and verifies it: when the
// customer says it is applied, then again by itself while refused (see
// RECHECKS). Locally with the demo, it can also apply the setup in the
// simulated cloud.
function setupCard(a, ctx, onReady) {
  const s = a.setup || { steps: [] };
  const steps = s.steps.filter(t => !API_VERIFY.test(t));
  const list = h('ol', { class: 'setup-steps', id: 'setup' }, steps.map((t, i) => h('li', { 'data-step': i + 1 },
    COMMAND.test(t) ? h('pre', { class: 'copy', tabindex: '0', 'aria-label': `Step ${i + 1}, a command to run` }, h('code', null, t)) : h('p', null, t),
    copyButton(t, `Copy step ${i + 1}`, `copy-step-${i + 1}`))));
  const policy = s.trust_policy ? JSON.stringify(s.trust_policy, null, 2) : '';
  const status = h('p', { id: 'setup-status', role: 'status' }, statusLine(a));
  const note = h('p', { class: 'muted', id: 'setup-note', 'aria-live': 'polite' });
  const err = h('div');
  const verify = h('button', { class: 'primary', type: 'button', id: 'verify' }, 'I’ve applied it — verify');
  let timer = null, left = false, rechecks = 0;
  ctx.onLeave(() => { left = true; clearTimeout(timer); });

  async function check(auto) {
    clearTimeout(timer);
    timer = null;
    if (left) return;
    if (!auto) rechecks = 0;
    verify.disabled = true;
    note.textContent = 'Asking your cloud…';
    try {
      const v = await ctx.api.post(`/cloud-accounts/${a.id}/verify`);
      if (left) return;
      flash(`${v.name} is ready: pick a cluster to register.`);
      onReady();
      return;
    } catch (x) {
      if (left) return;
      verify.disabled = false;
      // A refusal is stored on the account: the status line follows it.
      try { a = await ctx.api.get(`/cloud-accounts/${a.id}`); } catch { /* the status line keeps the last answer */ }
      if (left) return;
      status.textContent = statusLine(a);
      err.replaceChildren(errorBox(x, 'The cloud does not trust this org yet'));
      const reason = x.problem && x.problem.reason;
      if ((x.status === 422 || x.status === 503) && !WRONG_SETUP.has(reason) && rechecks < RECHECKS) {
        const wait = Math.min(10 * 2 ** rechecks, 60);
        rechecks++;
        note.textContent = `Checking again in ${wait} s: a change in your cloud can take a minute to apply.`;
        timer = setTimeout(() => check(true), wait * 1000);
      } else {
        note.textContent = WRONG_SETUP.has(reason) ? 'Fix the setup as the message says, then verify again.' : 'Check the steps above, then verify again.';
      }
    }
  }
  verify.addEventListener('click', () => check(false));

  const actions = [verify];
  if (ctx.cfg.dev_apply_setup) {
    const apply = h('button', { type: 'button', id: 'apply-demo' }, 'Apply in the simulated cloud');
    apply.addEventListener('click', async () => {
      apply.disabled = true;
      try {
        await ctx.api.post(ctx.cfg.dev_apply_setup, { account_id: a.id });
        if (left) return;
        flash('Applied in the simulated cloud: verifying.');
        await check(false);
      } catch (x) {
        if (!left) err.replaceChildren(errorBox(x, 'The simulated cloud did not apply the setup'));
      } finally {
        apply.disabled = false;
      }
    });
    actions.push(' ', apply);
  }
  return h('div', { class: 'card', id: 'setup-card' },
    h('h2', null, 'Set up the trust, then verify'),
    status,
    h('p', { class: 'muted' }, 'Your cloud must trust this org’s identity, and only it. Do these steps in your cloud, in order:'),
    list,
    policy ? h('details', { id: 'trust-policy' }, h('summary', null, 'The role’s whole trust policy (what step 1 sets), for the IAM console'),
      h('pre', { class: 'copy', tabindex: '0', 'aria-label': 'The role’s trust policy' }, policy), copyButton(policy, 'Copy the trust policy', 'copy-policy')) : null,
    err, h('p', null, ...actions), note);
}

export async function clusterPicker(root, [id], ctx) {
  const { api } = ctx;
  const a = await api.get(`/cloud-accounts/${id}`);
  if (a.status !== 'ready') {
    root.replaceChildren(h('p', null, h('a', { href: '#/connect' }, '← Cloud accounts')),
      h('h1', null, providerMark(a.provider, false), a.name), setupCard(a, ctx, () => clusterPicker(root, [id], ctx)));
    return;
  }
  const out = h('div', { id: 'clusters' });
  const err = h('div');
  // How Spaces reaches the cluster: it calls the API server (direct), or an
  // agent in the cluster calls out (a private API server).
  let connectivity = 'direct';
  const modes = h('fieldset', { class: 'row', id: 'connectivity' }, h('legend', null, 'How Spaces reaches the cluster'),
    [['direct', 'Direct: Spaces calls its API server'], ['agent', 'Through an agent: the API server is private; an agent in the cluster connects out']].map(([m, label]) => {
      const r = h('input', { type: 'radio', name: 'connectivity', id: `conn-mode-${m}`, value: m, checked: m === connectivity });
      r.addEventListener('change', () => { connectivity = m; });
      return h('label', { for: `conn-mode-${m}`, class: 'row' }, r, label);
    }));
  const head = [h('p', null, h('a', { href: '#/connect' }, '← Cloud accounts')),
    h('h1', null, providerMark(a.provider, false), `Pick a cluster in ${a.name}`), h('p', { class: 'muted' }, identity(a))];

  async function load(region) {
    out.replaceChildren(h('p', { class: 'loading' }, 'Asking the cloud for its clusters…'));
    try {
      const list = await api.get(`/cloud-accounts/${id}/clusters` + qs({ region }));
      render(list.items);
    } catch (x) {
      out.replaceChildren(errorBox(x, 'The cloud’s clusters could not be listed'));
    }
  }

  function render(items) {
    if (!items.length) { out.replaceChildren(empty('The account sees no cluster here.')); return; }
    out.replaceChildren(h('table', { class: 'stack' },
      h('thead', null, h('tr', null, ['Cluster', 'Location', 'Cloud status', ''].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', null, items.map(c => {
        const cell = h('td');
        if (c.registered_space_id) {
          cell.append(h('a', { href: `#/spaces/${c.registered_space_id}` }, 'Registered: open its space'));
        } else {
          const b = h('button', { class: 'primary', type: 'button', 'aria-label': `Register ${c.name}` }, 'Register');
          const e = h('div');
          b.addEventListener('click', async () => {
            b.disabled = true;
            try {
              // A fresh key per click: a retried request cannot register twice.
              const body = { provider: a.provider, space_type: 'kubernetes', cloud_account_id: id, config: c.config };
              if (connectivity === 'agent') body.connectivity = 'agent';
              const sp = await api.post('/spaces', body, { 'Idempotency-Key': `console-${crypto.randomUUID()}` });
              if (sp.agent_bootstrap) {
                bootstraps.set(sp.id, sp.agent_bootstrap);
                flash(`${sp.name} registered: install its agent to connect it.`);
              } else flash(`${sp.name} registered: it is probed now.`);
              ctx.go(`#/spaces/${sp.id}`);
            } catch (x) {
              b.disabled = false;
              e.replaceChildren(errorBox(x, `${c.name} was not registered`));
            }
          });
          cell.append(b, e);
        }
        return h('tr', { 'data-cluster': c.name },
          h('td', { 'data-label': 'Cluster' }, h('strong', null, c.name)), h('td', { 'data-label': 'Location' }, c.location),
          h('td', { 'data-label': 'Cloud status' }, cloudStatus(a.provider, c.status)), cell);
      }))));
  }

  if (a.provider === 'aws') {
    const saved = localStorage.getItem('spaces.region') || '';
    const reg = h('input', { id: 'region', name: 'region', list: 'aws-regions', required: true, value: saved, autocomplete: 'off', placeholder: 'eu-west-1' });
    const form = h('form', { class: 'row', id: 'region-form', 'aria-label': 'Region' }, field('AWS region', reg, 'EKS lists clusters per region.'),
      h('datalist', { id: 'aws-regions' }, AWS_REGIONS.map(r => h('option', { value: r }))), h('button', { type: 'submit' }, 'Show clusters'));
    form.addEventListener('submit', e => { e.preventDefault(); localStorage.setItem('spaces.region', reg.value.trim()); load(reg.value.trim()); });
    root.replaceChildren(...head, h('div', { class: 'card' }, form, modes, err, out));
    if (saved) await load(saved); else out.replaceChildren(h('p', { class: 'muted' }, 'Choose a region to list its clusters.'));
  } else {
    root.replaceChildren(...head, h('div', { class: 'card' }, modes, err, out));
    await load('');
  }
}
