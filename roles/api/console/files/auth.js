// The console's session. The access token lives in memory only; the
// refresh token in localStorage, so a reload (or a second tab) keeps the
// session. Every refresh rotates the refresh token, and the API treats a
// rotated token used again as theft and ends the session, so refreshes
// are serialised across tabs with the Web Locks API and each re-reads
// the stored token inside the lock: a tab whose token another tab has
// rotated uses the new one instead of replaying the old.

const KEY = 'edgeplat.console.refreshToken';
const LOCK = 'edgeplat.console.refresh';

export class Session {
  constructor(base = '/api/v1') {
    this.base = base;
    this.access = null;
    this.expires = 0;
    this.user = null;
    this.inflight = null;
  }

  get loggedIn() { return !!localStorage.getItem(KEY); }

  keep(s) {
    this.access = s.accessToken;
    this.expires = Date.now() + (s.expiresIn || 60) * 1000;
    localStorage.setItem(KEY, s.refreshToken);
    if (s.user) this.user = s.user;
  }

  forget() {
    this.access = null;
    this.expires = 0;
    this.user = null;
    localStorage.removeItem(KEY);
  }

  async post(path, body) {
    const res = await fetch(this.base + path, {method: 'POST', headers: {'Content-Type': 'application/json', 'Accept': 'application/json'},
      body: JSON.stringify(body), credentials: 'same-origin'});
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const e = new Error(data && data.error && data.error.message ? data.error.message : `HTTP ${res.status}`);
      e.status = res.status;
      e.code = data && data.error ? data.error.code : '';
      throw e;
    }
    return data;
  }

  // login takes an email or a user name.
  async login(login, password) {
    const body = login.includes('@') ? {email: login, password} : {username: login, password};
    this.keep(await this.post('/auth/login', body));
  }

  // refresh gets a new access token; false when the session is over.
  refresh() {
    if (!this.inflight) {
      this.inflight = this.lockedRefresh().finally(() => { this.inflight = null; });
    }
    return this.inflight;
  }

  async lockedRefresh() {
    const run = async () => {
      const token = localStorage.getItem(KEY);
      if (!token) return false;
      try {
        this.keep(await this.post('/auth/refresh', {refreshToken: token}));
        return true;
      } catch (err) {
        if (err.status === 401 || err.status === 403) {
          // Another tab may have rotated it between our read and the
          // answer only if it ran outside the lock; it cannot, so the
          // session is over.
          this.forget();
          return false;
        }
        throw err;
      }
    };
    return navigator.locks ? navigator.locks.request(LOCK, run) : run();
  }

  // headers are the credentials for one request, refreshed shortly
  // before the access token expires.
  async headers() {
    if (!this.access || Date.now() > this.expires - 15000) {
      if (!await this.refresh()) return {};
    }
    return {'Authorization': `Bearer ${this.access}`};
  }

  async logout() {
    const token = localStorage.getItem(KEY);
    this.forget();
    if (token) await this.post('/auth/logout', {refreshToken: token}).catch(() => {});
  }
}
