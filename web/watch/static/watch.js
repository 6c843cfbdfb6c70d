// switchyard watch client: follows one persist stream over the gateway's
// WebSocket (GET /ws/watch), tracks the next seq it needs, and reconnects
// with backoff from there after a close or a resync, so the application
// gets every message once and in order. No build step, no dependencies.
//
//   const w = SwitchyardWatch.connect({
//     scope: "hub", stream: "log",   // required
//     from: 1,                        // optional: first seq; absent = only new changes
//     apikey: "...",                  // optional: sent as ?apikey=
//     url: "/ws/watch",               // optional: the endpoint (relative to the page)
//     onMessage(m) {},                // each {"type":"msg",...}, seq strictly increasing
//     onEvent(m) {},                  // every other message (ready, delete, skipped, resync, error, ...)
//     onState(state, info) {},        // "connecting" | "open" | "closed"; info {code, reason, retryIn, attempt, status, fatal}
//   });
//   w.next      // the seq the next connection resumes from (undefined until known)
//   w.lastSeq   // the highest seq received (0 if none)
//   w.close()   // stop for good
(function (global) {
  "use strict";

  // Close codes after which reconnecting does not help (docs/websocket.md).
  var FATAL = { 1008: true, 4002: true };
  var BACKOFF_MIN = 250, BACKOFF_MAX = 10000;

  function connect(opts) {
    if (!opts || !opts.scope || !opts.stream) throw new Error("SwitchyardWatch.connect: scope and stream are required");
    var self = {
      next: opts.from != null && opts.from !== "" ? Number(opts.from) : undefined,
      lastSeq: 0,
      state: "closed",
      close: close,
    };
    var ws = null, timer = null, stopped = false, attempt = 0, everOpen = false;
    var onMessage = opts.onMessage || function () {};
    var onEvent = opts.onEvent || function () {};
    var onState = opts.onState || function () {};

    function setState(s, info) {
      self.state = s;
      onState(s, info || {});
    }

    function endpoint() {
      var u = new URL(opts.url || "ws/watch", global.location.href);
      u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
      u.searchParams.set("scope", opts.scope);
      u.searchParams.set("stream", opts.stream);
      if (self.next !== undefined) u.searchParams.set("from", String(self.next));
      if (opts.apikey) u.searchParams.set("apikey", opts.apikey);
      return u.toString();
    }

    function open() {
      timer = null;
      if (stopped) return;
      setState("connecting", { attempt: attempt });
      ws = new WebSocket(endpoint());
      ws.onmessage = function (e) {
        var m;
        try { m = JSON.parse(e.data); } catch (err) { return; }
        switch (m.type) {
          case "ready":
            attempt = 0;
            everOpen = true;
            if (self.next === undefined || m.from > self.next) self.next = m.from;
            setState("open", { from: m.from });
            break;
          case "msg":
            if (m.seq <= self.lastSeq) { onEvent({ type: "duplicate", seq: m.seq }); return; }
            self.lastSeq = m.seq;
            self.next = m.seq + 1;
            onMessage(m);
            return;
          case "skipped":
            if (self.next === undefined || m.last + 1 > self.next) self.next = m.last + 1;
            break;
          case "resync":
            // The first seq this connection did not deliver.
            self.next = m.from;
            break;
        }
        onEvent(m);
      };
      ws.onclose = function (e) {
        ws = null;
        if (stopped) { setState("closed", { code: e.code, reason: e.reason }); return; }
        if (FATAL[e.code]) {
          stopped = true;
          setState("closed", { code: e.code, reason: e.reason, fatal: true });
          return;
        }
        // A browser does not tell why an upgrade was refused (the close is
        // 1006, as for a lost connection). Before any connection worked,
        // ask the same URL over plain HTTP: a 4xx answer (bad scope,
        // forbidden, unauthorized) will not change by retrying, so show
        // its text and stop. 426 (upgrade required) means the request
        // itself is fine. Once a connection worked the parameters are
        // known good and a refusal is a server going away: retry.
        if (e.code === 1006 && !everOpen && global.fetch) {
          probe(function (status, text) {
            if (stopped) return;
            if (status >= 400 && status < 500 && status !== 408 && status !== 426 && status !== 429) {
              stopped = true;
              setState("closed", { code: e.code, status: status, reason: text, fatal: true });
              return;
            }
            retry(e);
          });
          return;
        }
        retry(e);
      };
    }

    // probe GETs the endpoint over HTTP and calls done(status, text); a
    // failed request is status 0.
    function probe(done) {
      var u = new URL(endpoint());
      u.protocol = u.protocol === "wss:" ? "https:" : "http:";
      global.fetch(u.toString(), { cache: "no-store", credentials: "same-origin" }).then(function (r) {
        return r.text().then(function (t) { done(r.status, t.trim().slice(0, 500)); });
      }, function () { done(0, ""); });
    }

    function retry(e) {
      // A resync reconnects at once; anything else backs off, jittered
      // so that many pages of a restarted gateway do not return in step.
      var wait = 0;
      if (e.code !== 4001) {
        wait = Math.min(BACKOFF_MAX, BACKOFF_MIN * Math.pow(2, attempt));
        wait = Math.round(wait * (0.75 + Math.random() * 0.5));
      }
      attempt++;
      setState("closed", { code: e.code, reason: e.reason, retryIn: wait, attempt: attempt });
      timer = setTimeout(open, wait);
    }

    function close() {
      stopped = true;
      if (timer) { clearTimeout(timer); timer = null; }
      if (ws) ws.close(1000, "client closed");
      else setState("closed", {});
    }

    open();
    return self;
  }

  global.SwitchyardWatch = { connect: connect };
})(typeof window !== "undefined" ? window : this);
