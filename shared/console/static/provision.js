// The provisioning form: account → cluster identity (region or location) →
// Kubernetes version → node pool → network → tags, posted as one
// POST /provisioning-jobs. Each provider's fields are described once in
// FIELDS, with the names the API's field errors use (data-field), so a 422
// lands beside its input. The API lists no regions, versions or machine
// types, so the form offers suggestions (datalists) and the cloud has the
// last word: a choice it refuses fails the job with its own message.
import { h, field, flash, errorBox, showFieldErrors, validate, PROVIDERS, AWS_REGIONS } from './ui.js';

// SUGGESTED_VERSIONS are Kubernetes minors the three clouds offered at the
// time of writing; any minor may be typed.
const SUGGESTED_VERSIONS = ['1.33', '1.32', '1.31', '1.30'];

// Per provider: the identity config keys (beyond clusterName, which all
// have), the network fields, a machine type as an example and common ones
// as suggestions (any the cloud offers may be typed). An entry is
// [key, label, placeholder, hint, data-field, {list, from}] where from
// names the account's connection key that fills it.
const FIELDS = {
  aws: {
    config: [['region', 'Region', 'eu-west-1', 'The AWS region to create the cluster in.', 'config.region', { list: 'job-aws-regions' }]],
    network: [
      ['subnet_ids', 'Subnet ids', 'subnet-0a1b2c3d, subnet-4e5f6a7b', 'At least two, in two availability zones (EKS requires it), comma separated.', 'spec.network.subnet_ids', { many: true }],
      ['security_group_ids', 'Security group ids', 'sg-0a1b2c3d', 'Optional, comma separated.', 'spec.network.security_group_ids', { many: true, optional: true }],
    ],
    machine: 'm5.large',
    machines: ['m6i.large', 'm6i.xlarge', 'm7g.large', 'm5.large', 'c6i.xlarge', 't3.medium'],
  },
  gcp: {
    config: [
      ['projectId', 'Project id', 'acme-prod', 'The project to create the cluster in.', 'config.projectId', { from: 'projectId' }],
      ['region', 'Location', 'europe-west1', 'A GCP region (a regional cluster) or zone.', 'config.region', {}],
    ],
    network: [
      ['network', 'VPC network', 'default', 'The VPC network name.', 'spec.network.network', {}],
      ['subnetwork', 'Subnetwork', 'default', 'A subnetwork of that network in the location.', 'spec.network.subnetwork', {}],
    ],
    machine: 'e2-standard-4',
    machines: ['e2-standard-4', 'e2-standard-8', 'n2-standard-4', 'n2-standard-8', 't2a-standard-4'],
  },
  azure: {
    config: [
      ['subscriptionId', 'Subscription id', '00000000-0000-0000-0000-000000000000', 'The subscription to create the cluster in.', 'config.subscriptionId', { from: 'subscriptionId', pattern: 'uuid' }],
      ['resourceGroup', 'Resource group', 'platform-rg', 'An existing resource group.', 'config.resourceGroup', {}],
    ],
    network: [
      ['location', 'Location', 'westeurope', 'The Azure location, such as westeurope.', 'spec.network.location', {}],
      ['vnet_subnet_id', 'Subnet resource id', '/subscriptions/…/resourceGroups/…/providers/Microsoft.Network/virtualNetworks/…/subnets/…', 'A subnet in the cluster’s subscription.', 'spec.network.vnet_subnet_id', {}],
    ],
    machine: 'Standard_D4s_v5',
    machines: ['Standard_D4s_v5', 'Standard_D8s_v5', 'Standard_D4ps_v5', 'Standard_B4ms', 'Standard_E4s_v5'],
  },
};

const list = v => v.split(',').map(s => s.trim()).filter(Boolean);

// provisionForm returns the form's card; accounts are the org's cloud
// accounts (only ready ones can create clusters); created is called with
// the new job.
export function provisionForm(ctx, accounts, created) {
  const ready = accounts.filter(a => a.status === 'ready');
  const card = h('div', { class: 'card' });
  if (!ready.length) {
    card.replaceChildren(h('h2', null, 'Provision a cluster'),
      h('p', { class: 'muted', id: 'provision-none' }, 'Provisioning creates clusters as a connected account’s identity: ',
        h('a', { href: '#/connect' }, 'connect and verify a cloud account'), ' first.'));
    return card;
  }
  const account = h('select', { id: 'job-account', 'data-field': 'cloud_account_id', required: true },
    ready.map(a => h('option', { value: a.id }, `${a.name} (${PROVIDERS[a.provider]})`)));
  const name = h('input', { id: 'job-clusterName', 'data-field': 'config.clusterName', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'prod-eu' });
  const version = h('input', { id: 'job-version', 'data-field': 'spec.kubernetes_version', required: true, list: 'job-versions', autocomplete: 'off', placeholder: '1.31' });
  const machine = h('input', { id: 'job-machine', 'data-field': 'spec.node_pool.machine_type', required: true, autocomplete: 'off', spellcheck: 'false', list: 'job-machines' });
  const machines = h('datalist', { id: 'job-machines' });
  const num = (id, key, value) => h('input', { id, type: 'number', min: 0, max: 1000, step: 1, value, required: true, 'data-field': `spec.node_pool.${key}` });
  const min = num('job-min', 'min_nodes', 1), desired = num('job-desired', 'desired_nodes', 2), max = num('job-max', 'max_nodes', 3);
  const tags = h('input', { id: 'job-tags', 'data-field': 'spec.tags', autocomplete: 'off', spellcheck: 'false', placeholder: 'team=platform, env=prod' });
  const configBox = h('div'), networkBox = h('div'), demo = h('div'), err = h('div');
  const inputs = { config: {}, network: {} };
  // One Idempotency-Key per job the user means to create: kept across a
  // retry after a lost answer, renewed once the API has answered.
  let key = crypto.randomUUID();

  const selected = () => ready.find(a => a.id === account.value);
  function render() {
    const a = selected(), f = FIELDS[a.provider];
    inputs.config = {}; inputs.network = {};
    const build = (group, box, rows) => box.replaceChildren(...rows.map(([k, label, ph, hint, df, o]) => {
      const el = h('input', { id: `job-${k}`, 'data-field': df, required: !o.optional, placeholder: ph, autocomplete: 'off', spellcheck: 'false', list: o.list, 'data-pattern': o.pattern });
      if (o.from && a.connection[o.from]) el.value = a.connection[o.from];
      inputs[group][k] = [el, o];
      return field(label, el, hint);
    }));
    build('config', configBox, f.config);
    build('network', networkBox, f.network);
    machine.placeholder = f.machine;
    machines.replaceChildren(...f.machines.map(m => h('option', { value: m })));
    const d = ctx.cfg.demo_provisioning && ctx.cfg.demo_provisioning[a.provider];
    demo.replaceChildren(d ? (() => {
      const b = h('button', { type: 'button', class: 'link', id: 'job-use-demo' }, `Use the local demo ${PROVIDERS[a.provider]} network`);
      b.addEventListener('click', () => fillDemo(d));
      return h('p', null, b);
    })() : '');
  }
  function fillDemo(d) {
    for (const [k, [el]] of Object.entries(inputs.config)) if (d.config[k]) el.value = d.config[k];
    for (const [k, [el]] of Object.entries(inputs.network)) {
      const v = d.spec.network[k];
      if (v) el.value = Array.isArray(v) ? v.join(', ') : v;
    }
    version.value = d.spec.kubernetes_version;
    machine.value = d.spec.node_pool.machine_type;
    min.value = d.spec.node_pool.min_nodes; desired.value = d.spec.node_pool.desired_nodes; max.value = d.spec.node_pool.max_nodes;
  }
  account.addEventListener('change', render);

  function body() {
    const a = selected();
    const config = { clusterName: name.value.trim() };
    for (const [k, [el]] of Object.entries(inputs.config)) config[k] = el.value.trim();
    const network = {};
    for (const [k, [el, o]] of Object.entries(inputs.network)) {
      const v = el.value.trim();
      if (o.many) { if (v) network[k] = list(v); } else network[k] = v;
    }
    const spec = {
      kubernetes_version: version.value.trim(),
      node_pool: { machine_type: machine.value.trim(), min_nodes: Number(min.value), desired_nodes: Number(desired.value), max_nodes: Number(max.value) },
      network,
    };
    const t = list(tags.value);
    if (t.length) spec.tags = Object.fromEntries(t.map(p => { const i = p.indexOf('='); return [p.slice(0, i).trim(), p.slice(i + 1).trim()]; }));
    return { provider: a.provider, cloud_account_id: a.id, config, spec };
  }

  const form = h('form', { id: 'provision-form', 'aria-labelledby': 'provision-title', novalidate: true },
    h('h2', { id: 'provision-title' }, 'Provision a cluster'),
    h('p', { class: 'muted' }, 'Spaces creates the cluster in your cloud as the account’s identity and registers it as a space once it is ready. Whether a version or machine type exists is your cloud’s to say: a refusal fails the job with its words.'),
    field('Cloud account', account, 'Only verified (ready) accounts can create clusters.'),
    field('Cluster name', name), configBox,
    field('Kubernetes version', version, 'A minor version such as 1.31.'),
    h('datalist', { id: 'job-versions' }, SUGGESTED_VERSIONS.map(v => h('option', { value: v }))),
    h('datalist', { id: 'job-aws-regions' }, AWS_REGIONS.map(r => h('option', { value: r }))),
    h('fieldset', null, h('legend', null, 'Node pool'),
      field('Machine type', machine), machines, h('div', { class: 'row' }, field('Min nodes', min), field('Desired nodes', desired), field('Max nodes', max))),
    h('fieldset', null, h('legend', null, 'Network'), networkBox),
    field('Tags', tags, 'Optional: key=value, comma separated; your cloud’s tag rules apply.'),
    demo, err, h('button', { class: 'primary', type: 'submit', id: 'provision' }, 'Provision'));
  form.addEventListener('submit', async e => {
    e.preventDefault();
    const submit = form.querySelector('#provision');
    submit.disabled = true;
    try {
      const extra = list(tags.value).filter(p => !p.includes('=')).map(() => ({ field: 'spec.tags', reason: 'each tag must be key=value' }));
      const bad = validate(form, extra.slice(0, 1));
      if (bad) throw bad;
      const job = await ctx.api.post('/provisioning-jobs', body(), { 'Idempotency-Key': key });
      key = crypto.randomUUID();
      showFieldErrors(form, null);
      err.replaceChildren();
      flash(`Provisioning ${job.config.clusterName}: the job is ${job.state}.`);
      name.value = '';
      await created(job);
    } catch (x) {
      if (x.status >= 400 && x.status < 500) key = crypto.randomUUID();
      const rest = showFieldErrors(form, x);
      err.replaceChildren(rest.length || !(x.problem && x.problem.errors) ? errorBox(x, 'The job was not created') : h('p', { class: 'err', role: 'alert' }, 'Fix the fields marked above.'));
    } finally {
      submit.disabled = false;
    }
  });
  render();
  card.append(form);
  // fill puts a job's settings in the form, to change what the cloud
  // refused and provision again (a job's own settings cannot be edited);
  // false when its account can no longer create clusters.
  card.fill = j => {
    if (!ready.some(a => a.id === j.cloud_account_id)) return false;
    account.value = j.cloud_account_id;
    render();
    name.value = j.config.clusterName;
    fillDemo({ config: j.config, spec: { ...j.spec, network: j.spec.network || {} } });
    tags.value = Object.entries(j.spec.tags || {}).map(([k, v]) => `${k}=${v}`).join(', ');
    showFieldErrors(form, null);
    form.scrollIntoView({ block: 'start' });
    version.focus();
    return true;
  };
  return card;
}
