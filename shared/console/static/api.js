// The API client: same origin, bearer token from the session, problem
// documents turned into ApiError, and conditional GETs for polled listings.

export class ApiError extends Error {
  constructor(status, problem, message) {
    super(message || (problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

// Counters the benchmark and the tests read: how many requests went out and
// how many came back 304; and the last few requests (method, path, status,
// or "pending" while out), which a failed browser test prints beside the
// page, so a screen that did not change says whether its request was sent
// and what it got.
export const stats = { requests: 0, notModified: 0, recent: [] };
window.__spacesStats = stats;
const RECENT = 30;

export function createApi(session, onUnauthorized) {
  const tags = new Map(); // path -> {etag, data}

  async function request(method, path, opts = {}) {
    const headers = {};
    const token = session.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
    Object.assign(headers, opts.headers || {});
    const cached = opts.poll ? tags.get(path) : undefined;
    if (cached) headers['If-None-Match'] = cached.etag;
    stats.requests++;
    const seen = { method, path, status: 'pending' };
    stats.recent.push(seen);
    if (stats.recent.length > RECENT) stats.recent.shift();
    let res;
    try {
      // no-store: the page manages its own ETags, so a 304 reaches it as one.
      res = await fetch(path, { method, headers, cache: 'no-store', credentials: 'omit', signal: opts.signal, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
    } catch (e) {
      seen.status = 'unreachable';
      throw new ApiError(0, null, 'The API could not be reached');
    }
    seen.status = res.status;
    if (res.status === 304 && cached) { stats.notModified++; return { data: cached.data, changed: false }; }
    if (res.status === 204) return { data: null, changed: true };
    const type = res.headers.get('Content-Type') || '';
    const body = type.includes('json') ? await res.json() : null;
    if (!res.ok) {
      if (res.status === 401) onUnauthorized();
      throw new ApiError(res.status, body);
    }
    const etag = res.headers.get('ETag');
    if (opts.poll && etag) tags.set(path, { etag, data: body });
    return { data: body, changed: true, etag };
  }

  const api = {
    request,
    get: (path, opts) => request('GET', path, opts).then(r => r.data),
    // poll: a conditional GET; opts.signal can abort it.
    poll: (path, opts) => request('GET', path, { ...opts, poll: true }),
    post: (path, body, headers) => request('POST', path, { body, headers }).then(r => r.data),
    put: (path, body, headers) => request('PUT', path, { body, headers }).then(r => r.data),
    patch: (path, body, headers) => request('PATCH', path, { body, headers }).then(r => r.data),
    del: (path, headers) => request('DELETE', path, { headers }).then(r => r.data),
    // all walks every page of a listing (limit 100); progress(n) hears
    // how many items it has so far after each page.
    async all(path, max = 50, progress) {
      const out = [];
      let cursor = '';
      for (let i = 0; i < max; i++) {
        const sep = path.includes('?') ? '&' : '?';
        const page = await api.get(`${path}${sep}limit=100${cursor ? '&cursor=' + encodeURIComponent(cursor) : ''}`);
        out.push(...page.items);
        if (progress) progress(out.length);
        if (!page.next_cursor) break;
        cursor = page.next_cursor;
      }
      return out;
    },
  };
  return api;
}

// pool runs fn on each item with at most limit calls out at once, and
// answers their results in the items' order (a failure is its error).
export async function pool(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      try { results[i] = await fn(items[i], i); } catch (x) { results[i] = x instanceof Error ? x : new Error(String(x)); }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

export function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : '';
}

// rotation watches several GETs with one request a tick: each tick asks the
// next source in turn (with its ETag, so most answers are 304s), and a
// source's changed(data) runs when its answer differs from the last one
// (every source once on the first tick). An idle screen so costs one
// request a tick whatever it watches; a change costs what changed() reads.
export function rotation(api, sources) {
  const last = new Map();
  let next = 0, started = false;
  const ask = async s => {
    const r = await api.poll(s.path());
    const sig = JSON.stringify(r.data);
    if (last.get(s) === sig) return false;
    last.set(s, sig);
    await s.changed(r.data);
    return true;
  };
  return async function tick() {
    if (!started) { started = true; for (const s of sources) await ask(s); return; }
    const s = sources[next];
    next = (next + 1) % sources.length;
    await ask(s);
  };
}
