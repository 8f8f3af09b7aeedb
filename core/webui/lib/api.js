// A JSON client for the roles' APIs. It understands both error shapes:
// the agent's {"error": "message"} and the cloud's
// {"error": {"code", "message"}}, and finds the fields a message names
// ("registers[0].address: must be ..."), so forms can show each error
// next to its field.

export class ApiError extends Error {
  constructor(status, message, code = '', body = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
    this.fields = fieldErrors(message, body);
  }
}

// A field path as the APIs write them: name, name.sub, name[2].sub.
const fieldRe = /^([A-Za-z_][A-Za-z0-9_]*(?:\[\d+\]|\.[A-Za-z_][A-Za-z0-9_]*)*): (.+)$/;

// fieldErrors splits a validation message into {field, message} pairs.
// Problems are joined with "; " (agent) or given as a list (cloud
// details); a problem that names no field is kept with field "".
export function fieldErrors(message, body) {
  const out = [];
  const details = body && body.error && Array.isArray(body.error.details) ? body.error.details : null;
  if (details) {
    for (const d of details) {
      if (d && typeof d === 'object') out.push({field: d.field || d.path || '', message: d.message || String(d)});
    }
    if (out.length) return out;
  }
  for (const part of String(message || '').split(/; |\n/)) {
    const m = fieldRe.exec(part.trim());
    out.push(m ? {field: m[1], message: m[2]} : {field: '', message: part.trim()});
  }
  return out.filter(f => f.message);
}

// Client talks to one API. base: "/v1" or "/api/v1". auth(): headers to
// add to each request (a fresh access token); refresh(): called once on a
// 401, returning true when a retry may succeed.
export class Client {
  constructor({base = '', auth = null, refresh = null, onUnauthorized = null} = {}) {
    this.base = base;
    this.auth = auth;
    this.refresh = refresh;
    this.onUnauthorized = onUnauthorized;
  }

  async request(method, path, body, {signal, raw = false, headers = {}} = {}) {
    const send = async () => {
      const hs = {'Accept': 'application/json', ...headers, ...(this.auth ? await this.auth() : {})};
      const init = {method, headers: hs, credentials: 'same-origin', signal};
      if (body !== undefined) {
        hs['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      return fetch(this.base + path, init);
    };
    let res = await send();
    if (res.status === 401 && this.refresh && await this.refresh()) res = await send();
    if (res.status === 401 && this.onUnauthorized) this.onUnauthorized();
    if (raw) return res;
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch { data = null; }
    }
    if (!res.ok) {
      let message = `${method} ${path}: HTTP ${res.status}`;
      let code = '';
      if (data && typeof data.error === 'string') message = data.error;
      else if (data && data.error && typeof data.error === 'object') {
        message = data.error.message || message;
        code = data.error.code || '';
      }
      throw new ApiError(res.status, message, code, data);
    }
    return data;
  }

  get(path, opts) { return this.request('GET', path, undefined, opts); }
  post(path, body = {}, opts) { return this.request('POST', path, body, opts); }
  put(path, body, opts) { return this.request('PUT', path, body, opts); }
  patch(path, body, opts) { return this.request('PATCH', path, body, opts); }
  del(path, opts) { return this.request('DELETE', path, undefined, opts); }
}

// qs builds a query string from the set values of params.
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  const s = u.toString();
  return s ? `?${s}` : '';
}
