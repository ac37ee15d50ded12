// The fleet's inventory: each space's Kubernetes version, the days to the
// end of its version's standard support, badges for support ending and
// serving certificates expiring, and the org's version distribution. All
// of it is drawn from what the screens read already (a space's facts, the
// counts' by_version): it asks nothing of its own.
import { h, s, stamp } from './ui.js';

// The windows of the badges and of the tiles that filter by them, the
// API's support_ends_within_days and certificate_expires_within_days.
export const SUPPORT_DAYS = 60;
export const CERT_DAYS = 30;

const DAY = 864e5;

// daysTo counts UTC calendar days from today to a YYYY-MM-DD day, as the
// API counts support_ends_within_days: 0 on the day itself, negative after.
export function daysTo(date, now = Date.now()) {
  const d = new Date(now);
  return Math.round((Date.parse(date + 'T00:00:00Z') - Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate())) / DAY);
}

// certDays is how many 24-hour days the certificate has left, rounded up
// (certificate_expires_within_days=N matches exactly when it is at most
// N); 0 or less once it has expired.
export function certDays(cert, now = Date.now()) {
  return Math.ceil((Date.parse(cert.not_after) - now) / DAY);
}

const plural = (n, one) => `${n} ${one}${n === 1 ? '' : 's'}`;

// support is what the support column and the detail say: text (the days
// left, "ended" or "unknown"), a title with the dates, and whether support
// is ending (within SUPPORT_DAYS, or ended: what the filter matches; an
// unknown version never is).
export function support(sp, now = Date.now()) {
  const f = sp.facts || {}, sup = f.support || { state: 'unknown' };
  if (sup.state === 'unknown' || !sup.standard_ends) {
    return { state: 'unknown', text: 'unknown', ending: false,
      title: f.kubernetes_version ? `${f.kubernetes_version} is not in the provider’s support calendar: its end of support is not known` : 'No Kubernetes version is known yet' };
  }
  const std = sup.standard_ends, ext = sup.extended_ends;
  if (sup.state === 'supported') {
    const n = daysTo(std, now);
    return { state: 'supported', text: plural(n, 'day'), ending: n <= SUPPORT_DAYS, date: std,
      title: `Standard support ends on ${std} (UTC)${ext ? `; extended support until ${ext}` : ''}` };
  }
  if (sup.state === 'extended') {
    return { state: 'extended', text: 'ended', note: `extended ${plural(daysTo(ext, now), 'day')}`, ending: true, date: std,
      title: `Standard support ended on ${std}; paid extended support ends on ${ext} (UTC)` };
  }
  return { state: 'unsupported', text: 'ended', ending: true, date: ext || std,
    title: `Support ended on ${ext || std} (UTC)` };
}

// supportCell shows support(sp) in a list cell or a detail's value.
export function supportCell(sp, now = Date.now()) {
  const v = support(sp, now);
  return h('span', { class: `support sup-${v.state}`, 'data-support': v.state, title: v.title }, v.text,
    v.note ? h('span', { class: 'reason' }, v.note) : null, h('span', { class: 'sr' }, ` (${v.title})`));
}

// versionCell is the space's Kubernetes version as last known, or
// "unknown".
export function versionCell(sp) {
  const v = sp.facts && sp.facts.kubernetes_version;
  return v ? h('span', { class: 'kver', 'data-version': v }, v) : h('span', { class: 'muted', 'data-version': '' }, 'unknown');
}

// factBadges are the warnings a space's facts call for: its support ending
// (within SUPPORT_DAYS, or ended) and its serving certificate expiring
// (within CERT_DAYS, or expired). Each says it in words, the date in its
// title and, for screen readers, in its text.
export function factBadges(sp, now = Date.now()) {
  const out = [];
  const sup = support(sp, now);
  if (sup.ending) {
    const ended = sup.state !== 'supported';
    const n = ended ? 0 : daysTo(sup.date, now);
    out.push(h('span', { class: `badge fact ${ended ? 'f-bad' : 'f-warn'}`, 'data-badge': 'support', title: sup.title },
      ended ? 'support ended' : `support ends in ${plural(n, 'day')}`, h('span', { class: 'sr' }, ` (${sup.title})`)));
  }
  const cert = sp.facts && sp.facts.certificate;
  if (cert) {
    const n = certDays(cert, now);
    if (n <= CERT_DAYS) {
      const title = `The API server’s certificate ${n > 0 ? 'is valid until' : 'expired'} ${stamp(cert.not_after)} (issuer ${cert.issuer})`;
      out.push(h('span', { class: `badge fact ${n > 0 ? 'f-warn' : 'f-bad'}`, 'data-badge': 'certificate', title },
        n > 0 ? `certificate expires in ${plural(n, 'day')}` : 'certificate expired', h('span', { class: 'sr' }, ` (${title})`)));
    }
  }
  return out.length ? h('span', { class: 'fact-badges' }, out) : null;
}

// certificateText is the detail's certificate line.
export function certificateText(sp) {
  const cert = sp.facts && sp.facts.certificate;
  if (!cert) return sp.connectivity === 'agent' ? '— (an agent space: Spaces never sees its API server)' : '— (not seen yet)';
  return `valid until ${stamp(cert.not_after)}, issued by ${cert.issuer}`;
}

// nodesText is an agent space's node count with its kubelet versions
// summed by minor, newest first: "3 (v1.31: 2, v1.30: 1)". A version that
// names no minor is shown as it is, last.
export function nodesText(sp) {
  const n = sp.facts && sp.facts.nodes;
  if (!n) return sp.connectivity === 'agent' ? '— (not reported by the agent yet)' : '— (counted for agent spaces only)';
  const minors = new Map(), other = [];
  for (const [v, c] of Object.entries(n.versions || {})) {
    const m = /^v?(\d+)\.(\d+)/.exec(v);
    if (m) minors.set(`${m[1]}.${m[2]}`, (minors.get(`${m[1]}.${m[2]}`) || 0) + c);
    else other.push(`${v}: ${c}`);
  }
  const parts = [...minors.keys()].sort(byVersion).map((k) => `v${k}: ${minors.get(k)}`).concat(other);
  return parts.length ? `${n.count} (${parts.join(', ')})` : String(n.count);
}

// byVersion orders the counts' versions newest first.
const byVersion = (a, b) => {
  const [am, an] = a.split('.').map(Number), [bm, bn] = b.split('.').map(Number);
  return bm - am || bn - an;
};

// inventory is the fleet view's inventory: a tile per warning, each a link
// that filters the list as its badge does (GET /space-counts counts
// neither, so the tile names its window, not a number), and the version
// distribution from the counts (by_version and version_unknown) as a
// table, each version's bar a link that filters the list by it. drawn is
// the list's state as shown, go sets the list's filters.
export function inventory(counts, drawn, go) {
  const filtered = { support_ends_within_days: String(SUPPORT_DAYS), certificate_expires_within_days: String(CERT_DAYS) };
  const tile = (key, head, label, param) => {
    const current = drawn[param] === filtered[param];
    return h('li', { 'data-count': key }, h('a', { href: '#', 'aria-current': current ? 'true' : null,
      onclick: e => { e.preventDefault(); go({ [param]: current ? '' : filtered[param] }); } }, h('b', { class: 'window' }, head), label));
  };
  const tiles = h('ul', { class: 'counts', 'aria-label': 'Spaces needing attention (filters)' },
    tile('support-ending', 'Support ending', `within ${SUPPORT_DAYS} days, or ended`, 'support_ends_within_days'),
    tile('certificate-expiring', 'Certificate expiring', `within ${CERT_DAYS} days, or expired`, 'certificate_expires_within_days'));
  if (!counts) return [tiles];
  const by = counts.by_version || {};
  const rows = Object.keys(by).sort(byVersion).map(v => [v, by[v]]);
  if (counts.version_unknown) rows.push(['unknown', counts.version_unknown]);
  const max = Math.max(1, ...rows.map(([, n]) => n));
  const bar = n => s('svg', { class: 'vbar', viewBox: '0 0 100 10', preserveAspectRatio: 'none', 'aria-hidden': 'true' },
    s('rect', { x: 0, y: 0, height: 10, width: Math.max(1, (n / max) * 100).toFixed(2) }));
  const table = rows.length ? h('table', { id: 'version-chart', class: 'versions' },
    h('caption', { class: 'sr' }, 'Spaces per Kubernetes version (major.minor), whole org'),
    h('thead', null, h('tr', null, h('th', { scope: 'col' }, 'Version'), h('th', { scope: 'col' }, 'Spaces'))),
    h('tbody', null, rows.map(([v, n]) => {
      const current = drawn.version === v;
      // The API filters by a version, never by its absence: unknown is
      // counted, not a link.
      const name = v === 'unknown' ? h('span', { class: 'muted', title: 'No version known: synthetic, or never answered and not named by the cloud' }, 'unknown')
        : h('a', { href: '#', 'aria-current': current ? 'true' : null, title: current ? 'Show every version again' : `Only the spaces on ${v}`,
          onclick: e => { e.preventDefault(); go({ version: current ? '' : v }); } }, v);
      return h('tr', { 'data-version': v }, h('th', { scope: 'row' }, name), h('td', null, h('span', { class: 'vcount' }, String(n)), bar(n)));
    }))) : h('p', { class: 'muted' }, 'No space yet.');
  return [tiles, h('h2', { id: 'versions-title' }, 'Kubernetes versions'), table];
}
