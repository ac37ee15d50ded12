// The status-history chart: one band per stretch of time a space spent in a
// status, over the chosen range, drawn as SVG with a title per band.
import { h, s } from './ui.js';

export const RANGES = { '24h': 864e5, '7d': 7 * 864e5, '30d': 30 * 864e5 };
const COLORS = { active: '#2da44e', inactive: '#cf222e', unknown: '#8c959f', none: '#eaeef2' };

// segments turns transitions (any order) into bands covering [from, now].
export function segments(transitions, space, from, now) {
  const ts = transitions.map(t => ({ ...t, ms: Date.parse(t.at) })).sort((a, b) => a.ms - b.ms);
  const created = Date.parse(space.created_at);
  const out = [];
  let start = from;
  if (created > from) { out.push({ status: 'none', from, to: created, reason: 'not registered yet' }); start = created; }
  const before = ts.filter(t => t.ms <= start);
  const within = ts.filter(t => t.ms > start && t.ms <= now);
  let cur = before.length ? before[before.length - 1] : null;
  let status = cur ? cur.to : (within.length ? within[0].from : space.status);
  let reason = cur ? cur.reason : (within.length ? '' : (space.probe && space.probe.reason));
  for (const t of within) {
    out.push({ status, from: start, to: t.ms, reason });
    start = t.ms; status = t.to; reason = t.reason;
  }
  out.push({ status, from: start, to: now, reason });
  return out.filter(b => b.to > b.from);
}

function pct(v, span) {
  if (!v) return '0%';
  const p = Math.round((v / span) * 1000) / 10;
  return p < 0.1 ? '<0.1%' : `${p}%`;
}

export function chart(bands, from, now, label) {
  const W = 1000, H = 44, span = now - from;
  const x = t => ((t - from) / span) * W;
  const share = {};
  for (const b of bands) share[b.status] = (share[b.status] || 0) + (b.to - b.from);
  const summary = Object.entries(share).filter(([k]) => k !== 'none')
    .map(([k, v]) => `${k} ${pct(v, span)}`).join(', ');
  const fmt = t => new Date(t).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
  // The axis's times are text beside the drawing, not in it: the drawing
  // scales to the width (a third of its size on a phone), text does not.
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Status ${label}: ${summary || 'no data'}` },
    ...bands.map(b => s('rect', {
      class: `band band-${b.status}`, x: x(b.from).toFixed(2), y: 0, width: Math.max(1, x(b.to) - x(b.from)).toFixed(2), height: H,
      fill: COLORS[b.status],
    }, s('title', null, `${b.status}${b.reason ? ' (' + b.reason + ')' : ''}: ${fmt(b.from)} – ${fmt(b.to)}`))),
    s('line', { x1: 0, x2: W, y1: H, y2: H, stroke: '#57606a' }));
  const axis = h('div', { class: 'axis', 'aria-hidden': 'true' }, h('span', null, fmt(from)), h('span', null, fmt(from + span / 2)), h('span', null, 'now'));
  const legend = h('div', { class: 'legend' },
    ['active', 'inactive', 'unknown', 'none'].filter(k => k !== 'none' || share.none).map(k => h('span', { class: `l-${k}` },
      `${k === 'none' ? 'not registered' : k} ${pct(share[k] || 0, span)}`)));
  return h('div', { class: 'chart' }, svg, axis, legend);
}
