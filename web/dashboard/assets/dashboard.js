// The switchyard dashboard: renders the snapshots the server pushes on
// /ws/dashboard (one a second), and reconnects with backoff when the
// connection drops. State is kept in the DOM for tests and scripts:
// body[data-seq] is the seq of the last snapshot shown (body[data-instance]
// the process it came from), #conn[data-state] is open, closed or
// connecting (#conn[data-failures] counts the drops and failed connects
// since it was last open), and key figures carry their raw number in
// data-value.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const backoffMin = 500, backoffMax = 10000;
  let backoff = backoffMin;
  let failures = 0; // connections closed or refused since the last open
  let shown = { instance: "", seq: 0 };

  // --- connection ---------------------------------------------------------

  function setConn(state, text) {
    const el = $("conn");
    el.dataset.state = state;
    if (state === "open") el.dataset.failures = "0";
    el.textContent = text;
    document.body.classList.toggle("stale", state !== "open");
  }

  function connect() {
    setConn("connecting", "Connecting…");
    const proto = location.protocol === "https:" ? "wss://" : "ws://";
    let ws;
    try {
      // Under --auth the browser sends the Basic credentials it was
      // prompted for on the page; a page opened with ?apikey= passes its
      // key on, as browsers cannot set headers on a WebSocket.
      const key = new URLSearchParams(location.search).get("apikey");
      const q = key ? "?apikey=" + encodeURIComponent(key) : "";
      ws = new WebSocket(proto + location.host + "/ws/dashboard" + q);
    } catch (e) {
      retry();
      return;
    }
    ws.onopen = () => {
      backoff = backoffMin;
      failures = 0;
      setConn("open", "Live");
    };
    ws.onmessage = (ev) => {
      let snap;
      try {
        snap = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      render(snap);
    };
    ws.onclose = retry;
  }

  function retry() {
    failures++;
    $("conn").dataset.failures = String(failures);
    const wait = backoff + Math.floor(Math.random() * backoff * 0.2);
    backoff = Math.min(backoff * 2, backoffMax);
    setConn("closed", "Disconnected — reconnecting in " + Math.ceil(wait / 1000) + " s");
    setTimeout(connect, wait);
  }

  // --- formatting ---------------------------------------------------------

  const nf = new Intl.NumberFormat();
  const num = (n) => nf.format(n);
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
  }
  // Every time on the page is UTC and says so: the header's and the
  // releases' alike, whatever the browser's zone.
  const date = (ms) => new Date(ms).toISOString().replace("T", " ").slice(0, 16) + " UTC";
  const clock = (ms) => new Date(ms).toISOString().slice(11, 19) + " UTC";
  function ago(ms) {
    const s = Math.round((ms - Date.now()) / 1000);
    return s >= 0 ? "in " + s + " s" : -s + " s ago";
  }

  // figure sets a key figure: its text and its raw data-value.
  function figure(id, value, text) {
    const el = $(id);
    el.dataset.value = String(value);
    el.textContent = text === undefined ? num(value) : text;
  }

  function show(id, on) { $(id).hidden = !on; }

  // table fills el with a header row and rows; a cell is a string, a
  // number (right-aligned), or {text, cls} / {node}. Text only, never HTML:
  // release names and holders come from outside.
  function table(el, head, rows) {
    const frag = document.createDocumentFragment();
    const tr = document.createElement("tr");
    for (const h of head) {
      const th = document.createElement("th");
      th.textContent = h.replace(/^#/, "");
      if (h.startsWith("#")) th.className = "num";
      tr.appendChild(th);
    }
    const thead = document.createElement("thead");
    thead.appendChild(tr);
    frag.appendChild(thead);
    const tbody = document.createElement("tbody");
    for (const row of rows) {
      const r = document.createElement("tr");
      for (const c of row) {
        const td = document.createElement("td");
        if (typeof c === "number") {
          td.className = "num";
          td.textContent = num(c);
        } else if (c && c.node) {
          td.appendChild(c.node);
          if (c.cls) td.className = c.cls;
        } else if (c && typeof c === "object") {
          td.textContent = c.text;
          if (c.cls) td.className = c.cls;
        } else {
          td.textContent = c;
        }
        r.appendChild(td);
      }
      tbody.appendChild(r);
    }
    frag.appendChild(tbody);
    el.replaceChildren(frag);
  }

  function bar(frac) {
    const b = document.createElement("span");
    b.className = "bar";
    const f = document.createElement("span");
    f.style.width = Math.max(0, Math.min(1, frac)) * 100 + "%";
    b.appendChild(f);
    return b;
  }

  // --- sections -----------------------------------------------------------

  function renderWork(w, err) {
    show("sec-work", !!w || !!err);
    show("work-error", !!err);
    $("work-error").textContent = err ? "work status: " + err : "";
    if (!w) return;
    $("work-source").textContent = "source " + w.source;
    figure("articles-done", w.articles.done || 0);
    figure("ranges-done", w.ranges.done || 0);
    figure("work-rate", w.articles_per_second, w.articles_per_second.toFixed(1));
    figure("leases-live", (w.leases || []).length);
    const states = Object.keys(w.ranges);
    table($("work-states"), ["state", "#ranges", "#articles"],
      states.map((s) => [s, w.ranges[s], w.articles[s] || 0]));
    table($("work-groups"), ["group", "#low", "#high", "#planned through", "done"],
      (w.groups || []).map((g) => {
        const frac = g.planned > 0 ? g.done / g.planned : 0;
        const cell = document.createElement("span");
        cell.append(bar(frac), " " + Math.floor(frac * 100) + "%");
        return [g.name, g.low, g.high, g.planned_through, { node: cell }];
      }));
    const leases = w.leases || [];
    table($("leases"), ["#range", "group", "articles", "holder", "progress", "expires"],
      leases.map((l) => {
        const size = l.last - l.first + 1;
        const done = l.progress ? l.progress - l.first + 1 : 0;
        const cell = document.createElement("span");
        cell.append(bar(size > 0 ? done / size : 0), " " + num(Math.max(0, done)) + "/" + num(size) + (l.read_all ? " read" : ""));
        return [l.range, l.group, num(l.first) + "–" + num(l.last), l.holder, { node: cell }, ago(l.expires)];
      }));
    const shares = w.shares || [];
    show("shares-title", shares.length > 0);
    table($("shares"), ["name", "#priority", "#min", "#max", "#using", "#granted", "seen"],
      shares.map((s) => [s.name, s.priority, s.min, s.max, s.using, s.granted, ago(s.seen)]));
  }

  function renderMembers(ms) {
    show("sec-members", ms.length > 0);
    if (ms.length === 0) return;
    figure("members-count", ms.length);
    const open = ms.reduce((a, m) => a + m.open_streams, 0);
    const b = ms.reduce((a, m) => a + m.open_bytes, 0);
    figure("streams-open", open);
    figure("streams-bytes", b, bytes(b));
    table($("members"), ["server", "state", "#open streams", "open bytes", "#commits", "#commit failures", "#feed on the bus", "#feed in process"],
      ms.map((m) => [m.id, m.not_ready ? { text: m.not_ready, cls: "bad" } : "ready",
        m.open_streams, bytes(m.open_bytes), m.commits, m.commit_failures, m.feed_published, m.feed_local || 0]));
  }

  function renderPools(ps) {
    table($("pools"), ["pool", "#size", "#allowed", "#grant", "#in use", "#idle", "#commands", "read", "#errors"],
      ps.map((p) => [p.gated ? { text: p.name + " (gated)", cls: "bad" } : p.name, p.size, p.allowed,
        p.grant < 0 ? "–" : p.grant, p.in_use, p.idle, p.commands, bytes(p.bytes_read), p.errors]));
  }

  function renderWatchers(ws) {
    show("sec-watchers", ws.length > 0);
    table($("watchers"), ["role", "#watchers", "#resyncs", "#gaps", "#lag"],
      ws.map((w) => [w.role, w.watchers, w.resyncs, w.gaps, w.lag]));
  }

  function renderPeers(ps) {
    show("sec-peers", ps.length > 0);
    if (ps.length === 0) return;
    $("region-name").textContent = "this is " + ps[0].region;
    table($("peers"), ["peer", "url", "#queued", "#in flight", "#batches", "#items", "#shed", "#lost", "#watches"],
      ps.map((p) => [p.name, p.url, p.queued, p.in_flight, p.batches, p.items,
        p.shed > 0 ? { text: String(p.shed), cls: "bad" } : p.shed, p.lost > 0 ? { text: String(p.lost), cls: "bad" } : p.lost, p.watches]));
  }

  function renderTotals(t) {
    show("sec-indexer", !!t);
    if (!t) return;
    figure("articles-indexed", t.articles);
    figure("ranges-indexed", t.ranges);
    figure("releases-published", t.published);
  }

  // releaseLink is a release's name linking to its page on /releases,
  // and the mark of one post-processing found passworded (1) or maybe
  // passworded (2: an archive inside the archive), as /releases marks it.
  function releaseLink(x) {
    const frag = document.createDocumentFragment();
    const a = document.createElement("a");
    a.href = "/releases?" + new URLSearchParams({ id: x.id }).toString();
    a.textContent = x.name;
    frag.appendChild(a);
    if (x.password) {
      const m = document.createElement("span");
      m.className = "pw";
      m.textContent = x.password === 1 ? "passworded" : "maybe passworded";
      frag.appendChild(m);
    }
    return frag;
  }

  function renderReleases(r, err) {
    show("sec-releases", !!r || !!err);
    show("releases-error", !!err);
    $("releases-error").textContent = err ? "releases: " + err : "";
    if (!r) return;
    figure("releases-total", r.total, num(r.total) + " in all");
    table($("releases"), ["name", "category", "size", "#files", "posted"],
      (r.items || []).map((x) => [{ node: releaseLink(x), cls: "name" }, x.category_name || String(x.category), bytes(x.size), x.files, date(x.date * 1000)]));
  }

  // The chart's scale is a robust maximum of the samples shown: the 95th
  // percentile, with headroom, so that one burst (the first range of a
  // start, say) does not flatten everything after it; a sample above it is
  // drawn at the top. The last samples are kept so that a resize redraws.
  let chartSamples = [];
  function robustMax(vs) {
    const sorted = vs.slice().sort((a, b) => a - b);
    const p95 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.95))];
    return Math.max(1, p95 * 1.2);
  }
  function renderChart(samples) {
    chartSamples = samples;
    show("sec-throughput", samples.length > 0);
    if (samples.length === 0) return;
    const last = samples[samples.length - 1].v;
    figure("rate-now", last, last.toFixed(0) + " articles/s now");
    drawChart(samples);
  }
  function drawChart(samples) {
    const c = $("chart");
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (w === 0 || h === 0 || samples.length === 0) return;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const css = getComputedStyle(document.documentElement);
    const max = robustMax(samples.map((s) => s.v));
    c.dataset.max = String(max);
    const t0 = samples[0].t, t1 = Math.max(t0 + 1, samples[samples.length - 1].t);
    const left = 44, top = 8, bottom = 16; // room for the axis labels
    const x = (t) => left + ((t - t0) / (t1 - t0)) * (w - left - 2);
    const y = (v) => h - bottom - (Math.min(v, max) / max) * (h - bottom - top);
    g.strokeStyle = css.getPropertyValue("--line");
    g.lineWidth = 1;
    g.beginPath();
    g.moveTo(left, y(0)); g.lineTo(w, y(0)); // the time axis
    g.moveTo(left, y(max)); g.lineTo(w, y(max)); // the scale's top
    g.moveTo(left, top); g.lineTo(left, y(0)); // the rate axis
    g.stroke();
    g.strokeStyle = css.getPropertyValue("--accent");
    g.lineWidth = 2;
    g.beginPath();
    samples.forEach((s, i) => (i === 0 ? g.moveTo(x(s.t), y(s.v)) : g.lineTo(x(s.t), y(s.v))));
    g.stroke();
    g.fillStyle = css.getPropertyValue("--fg");
    g.font = "11px system-ui, sans-serif";
    g.textAlign = "right";
    g.fillText(num(Math.round(max)) + "/s", left - 4, y(max) + 4);
    g.fillText("0", left - 4, y(0) + 4);
    g.textAlign = "left";
    g.fillText("−" + Math.round((t1 - t0) / 1000) + " s", left + 2, h - 3);
    g.textAlign = "right";
    g.fillText("now", w - 2, h - 3);
    g.textAlign = "left";
  }
  window.addEventListener("resize", () => drawChart(chartSamples));

  function render(s) {
    // A new instance is a restarted process: its seqs start again.
    if (s.instance === shown.instance && s.seq <= shown.seq) return;
    shown = { instance: s.instance, seq: s.seq };
    const errs = s.errors || {};
    renderWork(s.work, errs.work);
    renderMembers(s.members || []);
    renderPools(s.pools || []);
    renderWatchers(s.watchers || []);
    renderPeers(s.peers || []);
    renderTotals(s.totals);
    renderReleases(s.releases, errs.releases);
    renderChart(s.throughput || []);
    const shares = s.work ? s.work.shares || [] : [];
    show("sec-pools", (s.pools || []).length > 0 || shares.length > 0);
    show("sec-leases", !!s.work);
    $("updated").textContent = "updated " + clock(s.time);
    document.body.dataset.instance = s.instance;
    document.body.dataset.seq = String(s.seq);
  }

  connect();
})();
