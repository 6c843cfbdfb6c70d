// SwitchyardEvents: the browser client of GET /ws/events (docs/events.md,
// "WebSocket API"). It keeps its subscriptions across reconnects: after a
// dropped socket it reconnects with backoff and subscribes again to every
// anchor it held (a replacement the gateway refused leaves the one it
// kept), and sends again every ack the server has not answered
// (an ack is idempotent: a second one of an entry is answered like the
// first) and every durable unsubscribe made while it was down. Session
// subscriptions do not replay what happened while the socket was down;
// durable ones will. A request over the gateway's 8 KiB is refused (an
// onError "bad-request") and never sent: the gateway would close the
// socket on it.
//
//   const ev = new SwitchyardEvents({
//     apikey: "...",   // optional, sent as ?apikey= (a browser cannot set headers on a WebSocket)
//     app: "notes",    // optional, sent as ?app= (the app presence records; default web)
//     onEvent: (m) => ..., onGap: (m) => ..., onPresence: (m) => ...,
//     onError: (m) => ..., onState: (state) => ...,   // "connecting" | "open" | "closed"
//   });
//   ev.subscribe("files", "project-1/files/a", {ops: ["set"], glob: "**/*.txt"});
//   ev.subscribe("jobs", "project-1/jobs", null, "single");  // durable: stored, kept across sockets
//   ev.ack(m.sub, m.entry);                                   // a `single` delivery's (m.entry set)
//   ev.unsubscribe("files");
//   ev.close();
(function (global) {
  "use strict";

  // The gateway's MaxMessageBytes: a larger message closes the socket (1009).
  const MAX_MESSAGE_BYTES = 8192;

  function defaultURL(opts) {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const u = new URL(proto + "//" + location.host + "/ws/events");
    if (opts.app) u.searchParams.set("app", opts.app);
    if (opts.apikey) u.searchParams.set("apikey", opts.apikey);
    return u.toString();
  }

  class SwitchyardEvents {
    constructor(opts) {
      opts = opts || {};
      this.url = opts.url || defaultURL(opts);
      this.handlers = opts;
      this.subs = new Map();   // id -> {anchor, filter}
      this.acks = new Map();   // sub + "\n" + entry -> {sub, entry}
      this.unsubs = new Map(); // id -> mode: durable unsubscribes not answered yet
      this.retries = new Map(); // id -> requests answered "unavailable" on this socket
      // A subscribe refused for good leaves the gateway holding what it held
      // for its id, so the client must too: pending keeps the subscribes of
      // each id sent on this socket and not answered yet, oldest first, and
      // live what the gateway last confirmed for it (both reset per socket).
      this.pending = new Map(); // id -> [{anchor, filter, mode}]
      this.live = new Map();    // id -> {anchor, filter, mode}
      this.ws = null;
      this.closed = false;
      this.backoff = 500;
      this.reconnects = 0;
      this.connect();
    }

    emit(name, arg) {
      const f = this.handlers[name];
      if (typeof f === "function") {
        try { f(arg); } catch (e) { setTimeout(() => { throw e; }); }
      }
    }

    connect() {
      if (this.closed) return;
      this.emit("onState", "connecting");
      const ws = new WebSocket(this.url);
      this.ws = ws;
      ws.onopen = () => {
        // The backoff is reset by "ready", not here: a socket the server
        // closes right after opening must not be reopened at once, forever.
        this.emit("onState", "open");
        this.retries.clear(); // everything held is sent again below
        this.pending.clear();
        this.live.clear();
        // Unsubscribes first: a durable id unsubscribed, then subscribed
        // again while down, ends up subscribed, as asked.
        for (const [id, mode] of this.unsubs) this.send({type: "unsubscribe", id, mode});
        for (const [id, s] of this.subs) this.sendSub(id, s);
        for (const a of this.acks.values()) this.send({type: "ack", sub: a.sub, entry: a.entry});
      };
      ws.onmessage = (e) => {
        let m;
        try { m = JSON.parse(e.data); } catch (_) { return; }
        this.receive(m);
      };
      ws.onclose = (e) => {
        if (this.ws !== ws) return;
        this.ws = null;
        this.emit("onState", "closed");
        if (this.closed) return;
        // Jittered exponential backoff, 0.5 s doubling to 30 s.
        const wait = this.backoff * (0.75 + Math.random() / 2);
        this.backoff = Math.min(this.backoff * 2, 30000);
        this.reconnects++;
        setTimeout(() => this.connect(), wait);
      };
    }

    receive(m) {
      switch (m.type) {
        case "event": this.emit("onEvent", m); break;
        case "presence": this.emit("onPresence", m); break;
        case "gap": this.emit("onGap", m); break;
        case "subscribed": {
          this.retries.delete(m.id);
          const s = this.answered(m.id);
          if (s) this.live.set(m.id, s);
          this.emit("onSubscribed", m);
          break;
        }
        case "unsubscribed": this.retries.delete(m.id); this.unsubs.delete(m.id); this.live.delete(m.id); break;
        case "ready":
          this.backoff = 500; // the socket is up: the next drop retries soon
          this.emit("onReady", m);
          break;
        case "acked":
          this.retries.delete(m.id);
          this.acks.delete(m.sub + "\n" + m.id);
          break;
        case "error":
          if (m.code === "unknown-entry") {
            // The region holds no such delivery: acked before, or never
            // ours. Either way, nothing to send again.
            for (const [k, a] of this.acks) if (a.entry === m.id) this.acks.delete(k);
          } else if (m.id && m.code === "not-found") {
            // Answers an unsubscribe only: the row is gone already.
            this.unsubs.delete(m.id);
          } else if (m.id && m.code === "unavailable") {
            // "Retry": on this socket too, not only after the next
            // reconnect, which a socket that stays up never makes.
            this.answered(m.id);
            this.retryLater(m.id);
          } else if (m.id && this.answered(m.id)) {
            // A subscribe refused for good. The gateway keeps what it held
            // for the id (a replaced subscription stays as it was), and so
            // does the client, to subscribe to it again after a reconnect;
            // unless a later subscribe of the id is still to be answered.
            if (!this.pending.has(m.id)) {
              const old = this.live.get(m.id);
              if (old) this.subs.set(m.id, old); else this.subs.delete(m.id);
            }
          } else if (m.id) {
            // Refused for good: do not retry it on reconnect. An ack's
            // error names its entry: that ack is not sent again either.
            this.subs.delete(m.id);
            this.unsubs.delete(m.id);
            for (const [k, a] of this.acks) if (a.entry === m.id) this.acks.delete(k);
          }
          this.emit("onError", m);
          break;
      }
    }

    // retryLater sends the request of id (a subscribe, a durable
    // unsubscribe, or the ack of entry id) again after a jittered backoff,
    // 0.5 s doubling to 30 s per id, while this socket stays up and the
    // client still holds it; a reconnect sends it anyway.
    retryLater(id) {
      const ws = this.ws;
      const n = (this.retries.get(id) || 0) + 1;
      this.retries.set(id, n);
      const wait = Math.min(500 * 2 ** (n - 1), 30000) * (0.75 + Math.random() / 2);
      setTimeout(() => {
        if (this.closed || this.ws !== ws) return;
        const s = this.subs.get(id);
        if (s) return this.sendSub(id, s);
        if (this.unsubs.has(id)) return this.send({type: "unsubscribe", id, mode: this.unsubs.get(id)});
        for (const a of this.acks.values()) if (a.entry === id) this.send({type: "ack", sub: a.sub, entry: a.entry});
      }, wait);
    }

    // send sends m if the socket is open, and reports whether it did.
    send(m) {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
      this.ws.send(JSON.stringify(m));
      return true;
    }

    // sendSub sends the subscribe of id, and notes it to be answered.
    sendSub(id, s) {
      if (!this.send({type: "subscribe", id, anchor: s.anchor, filter: s.filter, mode: s.mode})) return;
      const q = this.pending.get(id);
      if (q) q.push(s); else this.pending.set(id, [s]);
    }

    // answered takes the oldest subscribe of id still to be answered, and
    // returns it (undefined when none is: the answer is another request's).
    answered(id) {
      const q = this.pending.get(id);
      if (!q) return undefined;
      const s = q.shift();
      if (q.length === 0) this.pending.delete(id);
      return s;
    }

    // fits reports whether m is within the gateway's limit, and tells
    // onError when it is not: sent, it would close the socket, and sent
    // again on every reconnect, close each one.
    fits(m, id) {
      const t = JSON.stringify(m);
      if (t.length * 3 <= MAX_MESSAGE_BYTES) return true; // a UTF-16 unit is at most 3 bytes of UTF-8
      const n = new TextEncoder().encode(t).length;
      if (n <= MAX_MESSAGE_BYTES) return true;
      this.emit("onError", {type: "error", id, code: "bad-request",
        message: "the request is " + n + " bytes, over the gateway's limit of " + MAX_MESSAGE_BYTES + " (not sent)"});
      return false;
    }

    // mode: undefined for a subscription of this socket only, "broadcast"
    // or "single" for a durable one (stored; subscribing again replaces it).
    // False when refused at once (onError says why), without a request.
    subscribe(id, anchor, filter, mode) {
      const s = {anchor: String(anchor)};
      if (filter && (filter.ops || filter.glob)) s.filter = filter;
      if (mode) s.mode = String(mode);
      const m = {type: "subscribe", id: String(id), anchor: s.anchor, filter: s.filter, mode: s.mode};
      if (!this.fits(m, m.id)) return false;
      this.subs.set(m.id, s);
      this.sendSub(m.id, s);
      return true;
    }

    unsubscribe(id) {
      const s = this.subs.get(String(id));
      if (!s) return;
      this.subs.delete(String(id));
      this.live.delete(String(id));
      // A durable row outlives the socket: its unsubscribe is kept until
      // answered, and sent again on reconnect (send drops it while down).
      if (s.mode) this.unsubs.set(String(id), s.mode);
      this.send({type: "unsubscribe", id: String(id), mode: s.mode});
    }

    ack(sub, entry) {
      const a = {sub: String(sub), entry: String(entry)};
      if (!this.fits({type: "ack", sub: a.sub, entry: a.entry}, a.entry)) return false;
      this.acks.set(a.sub + "\n" + a.entry, a);
      this.send({type: "ack", sub: a.sub, entry: a.entry});
      return true;
    }

    close() {
      this.closed = true;
      if (this.ws) this.ws.close(1000);
    }
  }

  global.SwitchyardEvents = SwitchyardEvents;
})(typeof window !== "undefined" ? window : globalThis);
