// DOM helpers. Everything is built with createElement and textContent, never
// innerHTML, so no API value can become markup.

export function h(tag, attrs, ...children) {
  const el = document.createElementNS(attrs && attrs.xmlns ? attrs.xmlns : 'http://www.w3.org/1999/xhtml', tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false || k === 'xmlns') continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = 'http://www.w3.org/2000/svg';
export function s(tag, attrs, ...children) { return h(tag, { ...attrs, xmlns: SVG }, ...children); }

export const PROVIDERS = { aws: 'AWS', gcp: 'Google Cloud', azure: 'Azure' };

// AWS_REGIONS are offered (datalists) where an AWS region is typed.
export const AWS_REGIONS = ['us-east-1', 'us-east-2', 'us-west-1', 'us-west-2', 'eu-west-1', 'eu-west-2', 'eu-west-3', 'eu-central-1', 'eu-north-1', 'ap-southeast-1', 'ap-southeast-2', 'ap-northeast-1', 'ap-south-1', 'sa-east-1', 'ca-central-1'];

// providerMark is a small recognisable mark per cloud (simplified shapes in
// each brand's colours, drawn here: nothing is fetched).
export function providerMark(p, withName = true) {
  let art;
  if (p === 'aws') {
    art = s('svg', { viewBox: '0 0 24 24', 'aria-hidden': 'true' },
      s('rect', { width: 24, height: 24, rx: 4, fill: '#232f3e' }),
      s('text', { x: 12, y: 12.5, 'text-anchor': 'middle', 'font-size': 8.5, 'font-weight': 700, fill: '#fff', 'font-family': 'Arial, sans-serif' }, 'aws'),
      s('path', { d: 'M5 16 Q12 20 19 16', stroke: '#ff9900', 'stroke-width': 1.8, fill: 'none', 'stroke-linecap': 'round' }),
      s('path', { d: 'M17 14.6 L19.4 15.8 L18.4 18', stroke: '#ff9900', 'stroke-width': 1.4, fill: 'none', 'stroke-linecap': 'round' }));
  } else if (p === 'gcp') {
    art = s('svg', { viewBox: '0 0 24 24', 'aria-hidden': 'true' },
      s('path', { d: 'M7 18 A5 5 0 0 1 6.5 8.1 A6.5 6.5 0 0 1 18.6 9.6', stroke: '#ea4335', 'stroke-width': 3, fill: 'none' }),
      s('path', { d: 'M18.6 9.6 A4.3 4.3 0 0 1 17 18', stroke: '#4285f4', 'stroke-width': 3, fill: 'none' }),
      s('path', { d: 'M17 18 L11 18', stroke: '#34a853', 'stroke-width': 3 }),
      s('path', { d: 'M11 18 L7 18', stroke: '#fbbc05', 'stroke-width': 3 }));
  } else {
    art = s('svg', { viewBox: '0 0 24 24', 'aria-hidden': 'true' },
      s('path', { d: 'M10 3 L15 3 L8 21 L2 21 Z', fill: '#0a5fb4' }),
      s('path', { d: 'M15.5 6 L22 21 L10 21 L16 18 L12.5 11 Z', fill: '#3ca0f0' }));
  }
  return h('span', { class: 'mark', title: PROVIDERS[p] || p }, art, withName ? (PROVIDERS[p] || p) : h('span', { class: 'sr' }, PROVIDERS[p] || p));
}

export function badge(status, reason, connectivity) {
  return h('span', { class: 'status-cell' },
    h('span', { class: `badge s-${status}`, 'data-status': status }, status),
    reason ? h('span', { class: 'reason', 'data-reason': reason }, reason) : null,
    connectivity ? h('span', { class: 'reason', 'data-connectivity': connectivity }, connectivity === 'agent' ? 'via agent' : 'direct') : null);
}

// bootstraps hands an agent space's install command from the page that
// registered it to the space's page, in memory only: the token it carries
// is shown once and never stored (no localStorage, no URL).
export const bootstraps = new Map();

export function ago(ts, now = Date.now()) {
  if (!ts) return 'never';
  const s = Math.max(0, Math.round((now - Date.parse(ts)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// stamp is an absolute time in the reader's zone, the zone named.
export function stamp(ts) {
  return new Date(ts).toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });
}

// PROBE_PRECISION is how precise the API says a probe time is
// (openapi.yaml, Probe.last_probe_at): one probe interval, a minute. The
// time is the minute tick the probe belonged to; the probe ran within the
// minute after it.
const PROBE_PRECISION = 60;

// probeAgo is the age of a probe time to the API's precision: never in
// seconds. Under a minute since the tick, the probe is under a minute old;
// after that, whole minutes since the tick are right to the minute.
export function probeAgo(ts, now = Date.now()) {
  if (!ts) return 'never';
  const s = Math.max(0, Math.floor((now - Date.parse(ts)) / 1000));
  return s < PROBE_PRECISION ? 'under a minute ago' : ago(ts, now);
}

// probeStamp names the minute a probe time stands for, not a second.
function probeStamp(ts) {
  const from = new Date(ts).toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
  return `in the minute from ${from} (probe times are kept to the minute)`;
}

// probedWhen is a probe time (last_probe_at, last_success_at) as the API
// defines it: to the minute, its title the minute it stands for.
export function probedWhen(ts) {
  return ts ? h('time', { datetime: ts, title: probeStamp(ts), 'data-precision': 'probe' }, probeAgo(ts)) : 'never';
}

// refreshAges moves the "… ago" of every time under root on, with no
// request, each to its own precision. Only a text that reads otherwise now
// is replaced, so a selection elsewhere on the page is left alone.
export function refreshAges(root) {
  const now = Date.now();
  for (const t of root.querySelectorAll('time[datetime]')) {
    const text = (t.dataset.precision === 'probe' ? probeAgo : ago)(t.getAttribute('datetime'), now);
    if (t.textContent !== text) t.textContent = text;
  }
}

// tickAges keeps every "… ago" on the page true as time passes: one
// timer for the whole page (a timeout, re-armed each second, none while
// the tab is hidden), no request. The polls redraw what changed; this
// moves the ages of what did not.
export function tickAges(root, every = 1000) {
  const tick = () => { if (!document.hidden) refreshAges(root); setTimeout(tick, every); };
  setTimeout(tick, every);
}

export function when(ts) {
  return ts ? h('time', { datetime: ts, title: stamp(ts) }, ago(ts)) : 'never';
}

// tombstone tells what remains of a deregistered space (the API's
// tombstone: on its 404, and on the gate of an environment it held).
export function tombstone(ts) {
  return h('span', { class: 'tombstone', 'data-tombstone': ts.id }, h('strong', null, ts.name), ' (deregistered ', when(ts.deregistered_at),
    ts.deregistered_by ? [' by ', h('span', { class: 'actor' }, ts.deregistered_by)] : null, ')');
}

// tombstoneOf is the tombstone a failed request answered, if any.
export function tombstoneOf(err) {
  return (err && err.status === 404 && err.problem && err.problem.tombstone) || null;
}

// region is where the space's cluster runs: the location its cloud
// answered at registration; without one (a synthetic space, or one
// registered before it was recorded), the config's region, or for Azure
// the resource group, said as such.
export function region(sp) {
  if (sp.location) return sp.location;
  const c = sp.config || {};
  if (sp.provider === 'azure') return `${c.resourceGroup} (resource group)`;
  return c.region || '';
}

export function flash(message, kind = 'info') {
  const el = document.getElementById('flash');
  el.replaceChildren(h('div', { class: `alert ${kind}` }, message));
  setTimeout(() => { if (el.textContent === message) el.replaceChildren(); }, 8000);
}

// errorBox says what went wrong and what to do about it.
export function errorBox(err, what) {
  const p = err && err.problem;
  const lines = [];
  if (p && p.errors) for (const e of p.errors) lines.push(h('li', null, h('code', null, e.field), ' ', e.reason));
  let hint = 'Try again; if it keeps failing, quote the request id to your platform team.';
  if (err && err.status === 0) hint = 'The API could not be reached: check your connection and try again.';
  else if (err && err.status === 503) hint = 'The service or the cloud is briefly unavailable: try again in a moment.';
  else if (err && err.status === 400) hint = 'Correct what it names and try again.';
  else if (err && err.status === 404) hint = 'It may have been deregistered or belong to another org.';
  // A conflict's detail says what to do (re-bind, wait until active); the
  // page itself shows the current state, so no reload is asked for.
  else if (err && (err.status === 409 || err.status === 412)) hint = p && p.detail ? '' : 'It changed meanwhile: the page shows its current state.';
  return h('div', { class: 'alert error', role: 'alert' },
    h('strong', null, what ? `${what}: ` : ''), (p && (p.detail || p.title)) || (err && err.message) || 'Something went wrong.',
    lines.length ? h('ul', null, lines) : null,
    h('div', { class: 'muted' }, hint, p && p.request_id ? ` (request id ${p.request_id})` : ''));
}

// showFieldErrors puts each error of a problem next to the input whose
// data-field names it; returns the errors no field claimed.
export function showFieldErrors(form, err) {
  for (const el of form.querySelectorAll('.err')) el.remove();
  for (const el of form.querySelectorAll('[aria-invalid]')) {
    el.removeAttribute('aria-invalid');
    if (el.dataset.describedby) el.setAttribute('aria-describedby', el.dataset.describedby); else el.removeAttribute('aria-describedby');
  }
  const rest = [];
  const list = (err && err.problem && err.problem.errors) || [];
  for (const e of list) {
    const input = form.querySelector(`[data-field="${CSS.escape(e.field)}"]`);
    if (!input) { rest.push(e); continue; }
    const id = input.id + '-err';
    if (!input.dataset.describedby) input.dataset.describedby = input.getAttribute('aria-describedby') || '';
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', id);
    input.closest('.field').append(h('span', { class: 'err', id }, e.reason));
    // The error goes as soon as the field is changed: it spoke of the old value.
    const clear = () => {
      input.removeEventListener('input', clear); input.removeEventListener('change', clear);
      const el = document.getElementById(id);
      if (el) el.remove();
      input.removeAttribute('aria-invalid');
      if (input.dataset.describedby) input.setAttribute('aria-describedby', input.dataset.describedby); else input.removeAttribute('aria-describedby');
    };
    input.addEventListener('input', clear);
    input.addEventListener('change', clear);
  }
  return rest;
}

export function field(label, input, hint) {
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, hint ? h('span', { class: 'muted' }, hint) : null);
}

export function empty(text, action) { return h('div', { class: 'empty' }, h('p', null, text), action || null); }

// PATTERNS mirror openapi.yaml's, so the console never sends a value the
// document forbids; the server's own answer is still shown field by field.
export const PATTERNS = {
  roleArn: ['^arn:aws(-cn|-us-gov)?:iam::[0-9]{12}:role/[\\w+=,.@/-]{1,512}$', 'must be an IAM role ARN: arn:aws:iam::<12-digit account>:role/<name>'],
  externalId: ['^[\\w+=,.@:/-]{2,1224}$', 'must be 2 or more letters, digits or +=,.@:/-_'],
  projectId: ['^[a-z][-a-z0-9]{4,28}[a-z0-9]$', 'must be a GCP project id: 6-30 lowercase letters, digits or hyphens, starting with a letter'],
  serviceAccountEmail: ['^[a-z][-a-z0-9]{4,28}[a-z0-9]@[a-z][-a-z0-9]{4,28}[a-z0-9]\\.iam\\.gserviceaccount\\.com$', 'must be a service account email: <name>@<project>.iam.gserviceaccount.com'],
  uuid: ['^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$', 'must be a UUID like 0f9e8d7c-6b5a-4948-8372-615f4e3d2c1b'],
  namespace: ['^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$', 'must be at most 63 lowercase letters, digits or hyphens, starting and ending with a letter or digit'],
  labelKey: ['^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$', 'keys must be Kubernetes label names (optional prefix/ then letters, digits, -_.)'],
  labelValue: ['^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$', 'values must be empty or up to 63 letters, digits or -_.'],
};

export function patterned(attrs, kind) {
  return h('input', { ...attrs, 'data-pattern': kind, autocomplete: 'off', spellcheck: 'false' });
}

// validate checks the form's inputs (required, data-pattern) the way the
// document will, and returns an error shaped like a problem, or null.
export function validate(form, extra = []) {
  const errors = [...extra];
  for (const el of form.querySelectorAll('input[data-field], select[data-field], textarea[data-field]')) {
    const v = el.value.trim();
    if (!v) { if (el.required) errors.push({ field: el.dataset.field, reason: 'is required' }); continue; }
    const p = PATTERNS[el.dataset.pattern];
    if (p && !new RegExp(p[0]).test(v)) errors.push({ field: el.dataset.field, reason: p[1] });
  }
  return errors.length ? { status: 0, problem: { title: 'Some fields need fixing', errors } } : null;
}
