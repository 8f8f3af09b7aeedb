// Server-Sent Events over fetch: EventSource cannot send an
// Authorization header, and the cloud's streams need one. The stream
// reconnects after a drop with exponential back-off (1 s doubling to
// 30 s, with jitter) and asks for fresh headers each time, so a rotated
// access token is used. onState sees "open", "retrying" and "closed".

export function openStream(url, {headers = async () => ({}), onEvent, onState = () => {}} = {}) {
  let closed = false;
  let ctrl = null;
  let delay = 1000;
  let timer = null;

  const connect = async () => {
    if (closed) return;
    ctrl = new AbortController();
    try {
      const res = await fetch(url, {headers: {'Accept': 'text/event-stream', ...(await headers())},
        credentials: 'same-origin', signal: ctrl.signal, cache: 'no-store'});
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      onState('open');
      delay = 1000;
      await readEvents(res.body, onEvent);
      if (!closed) retry('stream ended');
    } catch (err) {
      if (!closed) retry(err && err.message ? err.message : String(err));
    }
  };
  const retry = (why) => {
    onState('retrying', why, delay);
    const wait = delay * (0.8 + Math.random() * 0.4);
    delay = Math.min(delay * 2, 30000);
    timer = setTimeout(connect, wait);
  };
  connect();
  return () => {
    closed = true;
    clearTimeout(timer);
    if (ctrl) ctrl.abort();
    onState('closed');
  };
}

// readEvents parses the text/event-stream framing: "event:" and "data:"
// lines, events ended by a blank line, comments (":") ignored.
async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let event = 'message';
  let data = [];
  for (;;) {
    const {value, done} = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, '');
      buf = buf.slice(nl + 1);
      if (line === '') {
        if (data.length) onEvent(event, data.join('\n'));
        event = 'message';
        data = [];
      } else if (line.startsWith(':')) {
        continue;
      } else {
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') event = val;
        else if (field === 'data') data.push(val);
      }
    }
  }
}

// every runs fn now and then every ms (never more often than once a
// second), skipping runs while the tab is hidden; it returns a stop
// function. A run that is still going delays the next.
export function every(ms, fn) {
  ms = Math.max(ms, 1000);
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    if (!document.hidden) {
      try { await fn(); } catch (err) { console.warn(err); }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}
