// SwitchyardEvents: the browser client of GET /ws/events (docs/events.md,
// "WebSocket API"). It keeps its subscriptions across reconnects: after a
// dropped socket it reconnects with backoff and subscribes again to every
// anchor it held, and sends again every ack the server has not answered
// (an ack is idempotent: a second one of an entry is answered like the
// first). Session subscriptions do not replay what happened while the
// socket was down; durable ones will.
//
//   const ev = new SwitchyardEvents({
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

  function defaultURL() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    return proto + "//" + location.host + "/ws/events";
  }

  class SwitchyardEvents {
    constructor(opts) {
      opts = opts || {};
      this.url = opts.url || defaultURL();
      this.handlers = opts;
      this.subs = new Map();   // id -> {anchor, filter}
      this.acks = new Map();   // sub + "\n" + entry -> {sub, entry}
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
        this.backoff = 500;
        this.emit("onState", "open");
        for (const [id, s] of this.subs) this.send({type: "subscribe", id, anchor: s.anchor, filter: s.filter, mode: s.mode});
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
        case "subscribed": this.emit("onSubscribed", m); break;
        case "unsubscribed": break;
        case "ready": this.emit("onReady", m); break;
        case "acked":
          this.acks.delete(m.sub + "\n" + m.id);
          break;
        case "error":
          if (m.code === "unknown-entry") {
            // The region holds no such delivery: acked before, or never
            // ours. Either way, nothing to send again.
            for (const [k, a] of this.acks) if (a.entry === m.id) this.acks.delete(k);
          } else if (m.id && m.code !== "unavailable") {
            this.subs.delete(m.id); // refused for good: do not retry it on reconnect
          }
          this.emit("onError", m);
          break;
      }
    }

    send(m) {
      if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m));
    }

    // mode: undefined for a subscription of this socket only, "broadcast"
    // or "single" for a durable one (stored; subscribing again replaces it).
    subscribe(id, anchor, filter, mode) {
      const s = {anchor: String(anchor)};
      if (filter && (filter.ops || filter.glob)) s.filter = filter;
      if (mode) s.mode = String(mode);
      this.subs.set(String(id), s);
      this.send({type: "subscribe", id: String(id), anchor: s.anchor, filter: s.filter, mode: s.mode});
    }

    unsubscribe(id) {
      const s = this.subs.get(String(id));
      if (!s) return;
      this.subs.delete(String(id));
      this.send({type: "unsubscribe", id: String(id), mode: s.mode});
    }

    ack(sub, entry) {
      const a = {sub: String(sub), entry: String(entry)};
      this.acks.set(a.sub + "\n" + a.entry, a);
      this.send({type: "ack", sub: a.sub, entry: a.entry});
    }

    close() {
      this.closed = true;
      if (this.ws) this.ws.close(1000);
    }
  }

  global.SwitchyardEvents = SwitchyardEvents;
})(typeof window !== "undefined" ? window : globalThis);
