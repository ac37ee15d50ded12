// Sign-in. Deployed: OpenID Connect authorization code with PKCE (S256)
// against the configured issuer, as a public client. Locally: the local
// stack's development sign-in mints a token for any org with the key
// `make token` uses. The access token lives in sessionStorage only (this tab,
// gone when it closes): never in a URL, a cookie or a log line.

const KEY = 'spaces.session';
const PKCE = 'spaces.pkce';

export function createSession() {
  let cur = null;
  try { cur = JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch { cur = null; }
  if (cur && cur.expires_at && cur.expires_at < Date.now()) cur = null;
  return {
    token: () => cur && cur.token,
    org: () => cur && cur.org,
    // user: the token's subject, which keys what the console keeps per user.
    user: () => cur && cur.token ? (claims(cur.token).sub || '') : '',
    set(token, expiresIn) {
      cur = { token, org: claims(token).org_id || '?', expires_at: Date.now() + (expiresIn || 3600) * 1000 };
      sessionStorage.setItem(KEY, JSON.stringify(cur));
    },
    clear() { cur = null; sessionStorage.removeItem(KEY); },
  };
}

export function claims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(part));
  } catch { return {}; }
}

export async function devSignIn(cfg, session, org) {
  const res = await fetch(cfg.dev_sign_in, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ org }), cache: 'no-store' });
  const body = await res.json().catch(() => null);
  if (!res.ok) throw Object.assign(new Error((body && (body.detail || body.title)) || `sign-in failed (${res.status})`), { status: res.status, problem: body });
  session.set(body.access_token, body.expires_in);
}

function b64url(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(n) { return b64url(crypto.getRandomValues(new Uint8Array(n))); }

async function discover(issuer) {
  const res = await fetch(issuer.replace(/\/$/, '') + '/.well-known/openid-configuration', { cache: 'no-store', credentials: 'omit' });
  if (!res.ok) throw new Error(`the issuer's discovery document answered ${res.status}`);
  return res.json();
}

function redirectURI() { return location.origin + location.pathname; }

export async function oidcSignIn(cfg) {
  const meta = await discover(cfg.issuer);
  const verifier = random(48);
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const state = random(24);
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state, hash: location.hash }));
  const p = new URLSearchParams({
    response_type: 'code', client_id: cfg.client_id, redirect_uri: redirectURI(),
    scope: cfg.scope || 'openid', state, code_challenge: challenge, code_challenge_method: 'S256',
  });
  if (cfg.audience) p.set('audience', cfg.audience);
  location.assign(`${meta.authorization_endpoint}?${p}`);
}

// oidcCallback finishes a sign-in when the issuer redirected back with a
// code; it removes code and state from the address bar first thing.
export async function oidcCallback(cfg, session) {
  const q = new URLSearchParams(location.search);
  if (!q.has('code') && !q.has('error')) return false;
  const saved = JSON.parse(sessionStorage.getItem(PKCE) || 'null');
  sessionStorage.removeItem(PKCE);
  history.replaceState(null, '', location.pathname + ((saved && saved.hash) || '#/spaces'));
  if (q.has('error')) throw new Error(`the identity provider refused the sign-in: ${q.get('error_description') || q.get('error')}`);
  if (!saved || saved.state !== q.get('state')) throw new Error('the sign-in answer does not match this tab’s request; sign in again');
  const meta = await discover(cfg.issuer);
  const res = await fetch(meta.token_endpoint, {
    method: 'POST', cache: 'no-store', credentials: 'omit',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: q.get('code'), redirect_uri: redirectURI(), client_id: cfg.client_id, code_verifier: saved.verifier }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok || !body.access_token) throw new Error(`the token exchange failed: ${body.error_description || body.error || res.status}`);
  session.set(body.access_token, body.expires_in);
  return true;
}
