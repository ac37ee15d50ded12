// Cloud accounts: connect one (with the trust setup the customer does in
// their cloud), then pick one of its clusters and register it.
//
// Each provider is described once in CONNECTIONS (fields, hints, the trust
// setup text): a change to how accounts connect (for example an AWS external
// id that Spaces generates, or a pending/ready state) changes this table and
// the few lines that read it.
import { h, providerMark, errorBox, field, empty, flash, showFieldErrors, when, validate, patterned, PROVIDERS } from './ui.js';
import { qs } from './api.js';

const CONNECTIONS = {
  aws: {
    fields: [
      ['roleArn', 'IAM role ARN', 'arn:aws:iam::123456789012:role/spaces-access', 'The role Spaces assumes in your account.', 'roleArn'],
      ['externalId', 'External id', 'spaces-…', 'Shared secret the role’s trust policy requires (sts:ExternalId).', 'externalId'],
    ],
    trust: v => `# 1. Trust policy of ${v.roleArn || 'your role'}: let Spaces assume it, only with the external id.
{
  "Version": "2012-10-17",
  "Statement": [{
    "Effect": "Allow",
    "Principal": { "AWS": "<the Spaces deployment's AWS account id>" },
    "Action": "sts:AssumeRole",
    "Condition": { "StringEquals": { "sts:ExternalId": "${v.externalId || '<external id>'}" } }
  }]
}
# 2. Permissions policy of the role: list and describe the clusters.
{ "Version": "2012-10-17", "Statement": [{ "Effect": "Allow",
  "Action": ["eks:ListClusters", "eks:DescribeCluster"], "Resource": "*" }] }
# 3. On each cluster, an access entry for the role:
aws eks create-access-entry --cluster-name <cluster> --principal-arn ${v.roleArn || '<role arn>'}
aws eks associate-access-policy --cluster-name <cluster> --principal-arn ${v.roleArn || '<role arn>'} \\
  --policy-arn arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy --access-scope type=cluster`,
  },
  gcp: {
    fields: [
      ['projectId', 'Project id', 'acme-prod', 'The project that holds the clusters.', 'projectId'],
      ['serviceAccountEmail', 'Service account', 'spaces@acme-prod.iam.gserviceaccount.com', 'The service account Spaces impersonates.', 'serviceAccountEmail'],
    ],
    trust: v => `# Let Spaces' workload identity impersonate the service account:
gcloud iam service-accounts add-iam-policy-binding ${v.serviceAccountEmail || '<service account>'} \\
  --project ${v.projectId || '<project>'} --role roles/iam.workloadIdentityUser \\
  --member "principalSet://iam.googleapis.com/<the Spaces workload identity pool>/*"
# Let the service account see and reach the clusters:
gcloud projects add-iam-policy-binding ${v.projectId || '<project>'} \\
  --member serviceAccount:${v.serviceAccountEmail || '<service account>'} --role roles/container.developer`,
  },
  azure: {
    fields: [
      ['tenantId', 'Tenant id', '00000000-0000-0000-0000-000000000000', 'Your Entra ID tenant.', 'uuid'],
      ['clientId', 'Application (client) id', '00000000-0000-0000-0000-000000000000', 'The Entra application Spaces federates into.', 'uuid'],
      ['subscriptionId', 'Subscription id', '00000000-0000-0000-0000-000000000000', 'The subscription that holds the clusters.', 'uuid'],
    ],
    trust: v => `# Trust Spaces' federated token on the application:
az ad app federated-credential create --id ${v.clientId || '<client id>'} --parameters '{
  "name": "spaces", "issuer": "<the Spaces deployment's token issuer>",
  "subject": "<the Spaces runtime identity>", "audiences": ["api://AzureADTokenExchange"] }'
# Let it list the clusters and get user credentials:
az role assignment create --assignee ${v.clientId || '<client id>'} \\
  --role "Azure Kubernetes Service Cluster User Role" --scope /subscriptions/${v.subscriptionId || '<subscription>'}`,
  },
};

const AWS_REGIONS = ['us-east-1', 'us-east-2', 'us-west-1', 'us-west-2', 'eu-west-1', 'eu-west-2', 'eu-west-3', 'eu-central-1', 'eu-north-1', 'ap-southeast-1', 'ap-southeast-2', 'ap-northeast-1', 'ap-south-1', 'sa-east-1', 'ca-central-1'];

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
  const trust = h('pre', { class: 'copy', id: 'trust', tabindex: '0', 'aria-label': 'Trust setup to run in your cloud' });
  const copy = h('button', { type: 'button' }, 'Copy the trust setup');
  copy.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(trust.textContent); flash('Trust setup copied.'); } catch { flash('Copying was refused: select the text and copy it.', 'warn'); }
  });
  const err = h('div');
  const inputs = {};
  const demo = h('div');

  function renderFields() {
    const spec = CONNECTIONS[provider];
    for (const k of Object.keys(inputs)) delete inputs[k];
    fieldsBox.replaceChildren(...spec.fields.map(([key, label, ph, hint, pattern]) => {
      const el = patterned({ id: `conn-${key}`, name: key, required: true, placeholder: ph, 'data-field': `connection.${key}` }, pattern);
      el.addEventListener('input', renderTrust);
      inputs[key] = el;
      return field(label, el, hint);
    }));
    const d = ctx.cfg.demo_connections && ctx.cfg.demo_connections[provider];
    demo.replaceChildren(d ? (() => {
      const b = h('button', { type: 'button', class: 'link', id: 'use-demo' }, `Use the local demo ${PROVIDERS[provider]} account`);
      b.addEventListener('click', () => { for (const [k, v] of Object.entries(d)) if (inputs[k]) inputs[k].value = v; if (!name.value) name.value = `demo ${provider}`; renderTrust(); });
      return h('p', null, b);
    })() : '');
    renderTrust();
  }
  function renderTrust() {
    const v = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
    trust.textContent = CONNECTIONS[provider].trust(v);
  }

  const form = h('form', { class: 'card', id: 'connect-form', 'aria-labelledby': 'connect-title', novalidate: true },
    h('h2', { id: 'connect-title' }, 'Connect a cloud account'),
    h('p', { class: 'muted' }, 'Spaces holds no cloud secret: it federates into an identity you grant. Set up the trust below in your cloud, then connect.'),
    radios, field('Name', name, 'How this account is shown here.'), demo, fieldsBox,
    h('h3', null, 'Trust setup (run in your cloud)'), trust, h('p', null, copy),
    err, h('button', { class: 'primary', type: 'submit' }, 'Connect'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const connection = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
    try {
      const bad = validate(form);
      if (bad) throw bad;
      const a = await api.post('/cloud-accounts', { provider, name: name.value.trim(), connection });
      flash(`${a.name} connected. Pick a cluster to register.`);
      ctx.go(`#/accounts/${a.id}/clusters`);
    } catch (x) {
      const rest = showFieldErrors(form, x);
      err.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The account was not connected') : h('p', { class: 'err', role: 'alert' }, 'Fix the fields marked above.'));
    }
  });
  renderFields();
  root.replaceChildren(h('h1', null, 'Cloud accounts'), h('div', { class: 'card' }, h('h2', null, 'Connected accounts'), list), form);

  const accts = await api.all('/cloud-accounts');
  list.replaceChildren(accts.length ? h('table', { class: 'stack', id: 'accounts-table' },
    h('thead', null, h('tr', null, ['Name', 'Cloud', 'Identity', 'Connected', ''].map(t => h('th', { scope: 'col' }, t)))),
    h('tbody', null, accts.map(a => h('tr', { 'data-account': a.id },
      h('td', { 'data-label': 'Name' }, a.name), h('td', { 'data-label': 'Cloud' }, providerMark(a.provider)),
      h('td', { 'data-label': 'Identity' }, h('code', null, identity(a))), h('td', { 'data-label': 'Connected' }, when(a.created_at)),
      h('td', null, h('a', { href: `#/accounts/${a.id}/clusters` }, 'Pick a cluster'))))))
    : empty('No cloud account is connected yet: connect one below.'));
}

export async function clusterPicker(root, [id], ctx) {
  const { api } = ctx;
  const a = await api.get(`/cloud-accounts/${id}`);
  const out = h('div', { id: 'clusters' });
  const err = h('div');
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
              const sp = await api.post('/spaces', { provider: a.provider, space_type: 'kubernetes', cloud_account_id: id, config: c.config },
                { 'Idempotency-Key': `console-${crypto.randomUUID()}` });
              flash(`${sp.name} registered: it is probed now.`);
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
          h('td', { 'data-label': 'Cloud status' }, c.status || '—'), cell);
      }))));
  }

  if (a.provider === 'aws') {
    const saved = localStorage.getItem('spaces.region') || '';
    const reg = h('input', { id: 'region', name: 'region', list: 'aws-regions', required: true, value: saved, autocomplete: 'off', placeholder: 'eu-west-1' });
    const form = h('form', { class: 'row', id: 'region-form', 'aria-label': 'Region' }, field('AWS region', reg, 'EKS lists clusters per region.'),
      h('datalist', { id: 'aws-regions' }, AWS_REGIONS.map(r => h('option', { value: r }))), h('button', { type: 'submit' }, 'Show clusters'));
    form.addEventListener('submit', e => { e.preventDefault(); localStorage.setItem('spaces.region', reg.value.trim()); load(reg.value.trim()); });
    root.replaceChildren(...head, h('div', { class: 'card' }, form, err, out));
    if (saved) await load(saved); else out.replaceChildren(h('p', { class: 'muted' }, 'Choose a region to list its clusters.'));
  } else {
    root.replaceChildren(...head, h('div', { class: 'card' }, err, out));
    await load('');
  }
}
