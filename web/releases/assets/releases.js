// The switchyard releases page: searches the indexer (GET
// /releases/api/search, the index of the Newznab API's t=search), shows
// one release (/releases?id=ID), and follows the releases stream over the
// watch gateway (/ws/watch, through /ws/watch.js) to search again when it
// changes, so new releases appear at the top without a reload.
//
// The API key is never in a URL: it is POSTed once to /releases/api/key,
// which keeps it in an HttpOnly cookie that every later request (and the
// WebSocket) carries. State is kept in the DOM for tests and scripts:
// body[data-view] is key, list or release; #results[data-renders] counts
// the list's renders; a release row is tr[data-id], tr.new when it came
// live.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  let info = null;
  let watcher = null;
  let lastSeen = 0; // the highest releases-stream seq heard of
  // The keys of the releases that arrived while another page than the
  // first is shown: a release counts once however often it is updated.
  let fresh = new Set();
  let shown = new Set(); // ids on the list, to mark the ones that arrive live
  let timer = null, inflight = false, again = false;
  // latest numbers the requests for what is shown (a list or a release):
  // an answer to an older one is dropped, so a slow live re-search cannot
  // replace what the person asked for since.
  let latest = 0;

  // --- state in the URL (never a key) --------------------------------------

  function state() {
    const p = new URLSearchParams(location.search);
    return { id: p.get("id") || "", q: p.get("q") || "", cat: p.get("cat") || "", group: p.get("group") || "", offset: Math.max(0, Math.floor(Number(p.get("offset"))) || 0) };
  }
  function listURL(s) {
    const p = new URLSearchParams();
    if (s.q) p.set("q", s.q);
    if (s.cat) p.set("cat", s.cat);
    if (s.group) p.set("group", s.group);
    if (s.offset) p.set("offset", String(s.offset));
    const qs = p.toString();
    return "/releases" + (qs ? "?" + qs : "");
  }
  const releaseURL = (id) => "/releases?" + new URLSearchParams({ id: id }).toString();

  // --- formatting ---------------------------------------------------------

  const nf = new Intl.NumberFormat();
  const num = (n) => nf.format(n);
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i === 0 ? n : n.toFixed(1)) + " " + u[i];
  }
  const date = (sec) => new Date(sec * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
  function age(sec) {
    const s = Math.max(0, Math.round(Date.now() / 1000 - sec));
    if (s < 60) return "just now";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) return Math.floor(s / 3600) + " h";
    return Math.floor(s / 86400) + " d";
  }

  function show(id, on) { $(id).hidden = !on; }
  function setError(id, text) { $(id).textContent = text || ""; show(id, !!text); }
  function view(v) {
    document.body.dataset.view = v;
    show("sec-key", v === "key");
    show("sec-list", v === "list");
    show("sec-release", v === "release");
  }

  // cell makes a td: text only, never HTML (names come from posters).
  function cell(text, cls, label) {
    const td = document.createElement("td");
    if (text instanceof Node) td.appendChild(text); else td.textContent = text;
    if (cls) td.className = cls;
    if (label) td.dataset.label = label;
    return td;
  }
  function head(cols) {
    const thead = document.createElement("thead");
    const tr = document.createElement("tr");
    for (const c of cols) {
      const th = document.createElement("th");
      th.textContent = c.replace(/^#/, "");
      if (c.startsWith("#")) th.className = "num";
      tr.appendChild(th);
    }
    thead.appendChild(tr);
    return thead;
  }
  function bar(frac) {
    const b = document.createElement("span");
    b.className = "bar";
    const f = document.createElement("span");
    f.style.width = Math.max(0, Math.min(1, frac)) * 100 + "%";
    b.appendChild(f);
    return b;
  }

  // --- requests -----------------------------------------------------------

  // api GETs a JSON endpoint; a 401 shows the key form and rejects.
  async function api(path) {
    const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (r.status === 401) {
      askKey(body && body.error ? body.error.message : "");
      throw new Error("signed out");
    }
    if (!r.ok) throw new Error(body && body.error ? body.error.message : "HTTP " + r.status);
    return body;
  }

  // --- signing in ---------------------------------------------------------

  function askKey(problem) {
    if (watcher) { watcher.close(); watcher = null; }
    view("key");
    show("key-bus", !!(info && info.bus_users));
    show("sign-out", false);
    $("who").textContent = "";
    setError("key-error", problem && problem.indexOf("unknown") >= 0 ? problem : "");
    $("key").focus();
  }

  $("key-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    setError("key-error", "");
    const r = await fetch("/releases/api/key", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ key: $("key").value }),
    });
    let body = null;
    try { body = await r.json(); } catch (e) { body = null; }
    if (!r.ok) {
      setError("key-error", body && body.error ? body.error.message : "sign-in failed: HTTP " + r.status);
      return;
    }
    $("key").value = "";
    await start();
  });

  $("sign-out").addEventListener("click", async () => {
    await fetch("/releases/api/key", { method: "DELETE", credentials: "same-origin" });
    location.reload();
  });

  // --- the list -----------------------------------------------------------

  function fillForm(s) {
    $("q").value = s.q;
    $("cat").value = s.cat;
    $("group").value = s.group;
  }

  function fillCategories(cats) {
    const sel = $("cat");
    for (const c of cats) {
      const g = document.createElement("optgroup");
      g.label = c.name;
      const all = document.createElement("option");
      all.value = String(c.id);
      all.textContent = c.name + " (all)";
      g.appendChild(all);
      for (const s of c.subcats || []) {
        const o = document.createElement("option");
        o.value = String(s.id);
        o.textContent = c.name + " > " + s.name;
        g.appendChild(o);
      }
      sel.appendChild(g);
    }
  }

  const groupsSeen = new Set();
  function noteGroups(items) {
    for (const it of items) {
      for (const g of it.groups) {
        if (groupsSeen.has(g)) continue;
        groupsSeen.add(g);
        const o = document.createElement("option");
        o.value = g;
        $("groups").appendChild(o);
      }
    }
  }

  async function loadList(live) {
    const s = state();
    const p = new URLSearchParams();
    if (s.q) p.set("q", s.q);
    if (s.cat) p.set("cat", s.cat);
    if (s.group) p.set("group", s.group);
    if (s.offset) p.set("offset", String(s.offset));
    p.set("limit", String(info.page_size));
    if (live && lastSeen) p.set("seen", String(lastSeen));
    const n = ++latest;
    let ans;
    try {
      ans = await api("/releases/api/search?" + p.toString());
    } catch (e) {
      if (n === latest && e.message !== "signed out") setError("list-error", "search: " + e.message);
      return;
    }
    if (n !== latest) return;
    setError("list-error", "");
    renderList(s, ans, live);
  }

  function renderList(s, ans, live) {
    const t = $("results");
    const tbody = document.createElement("tbody");
    const before = shown;
    shown = new Set();
    for (const it of ans.items) {
      shown.add(it.id);
      const tr = document.createElement("tr");
      tr.dataset.id = it.id;
      if (live && !before.has(it.id)) tr.className = "new";
      const a = document.createElement("a");
      a.href = releaseURL(it.id);
      a.dataset.inpage = "";
      a.textContent = it.name;
      const name = cell(a, "name");
      if (it.password) name.append(pwMark(it.password));
      const when = cell(age(it.date), "num", "age");
      when.title = date(it.date);
      tr.append(
        name,
        cell(it.category_name || String(it.category), "", "category"),
        cell(bytes(it.size), "num", "size"),
        cell(num(it.files), "num", "files"),
        when,
        cell(it.groups.join(", "), "wrap", "group"),
        cell(it.poster, "wrap", "poster"));
      tbody.appendChild(tr);
    }
    t.replaceChildren(head(["name", "category", "#size", "#files", "#age", "group", "poster"]), tbody);
    t.dataset.renders = String(Number(t.dataset.renders) + 1);
    noteGroups(ans.items);
    const first = ans.total === 0 ? 0 : ans.offset + 1;
    const last = ans.offset + ans.items.length;
    $("summary").dataset.total = String(ans.total);
    // A page past the last release (a stale link, or releases gone since)
    // has no range to name: it says how many there are instead, and Newer
    // leads back.
    const past = ans.total > 0 && ans.items.length === 0;
    $("summary").textContent = ans.total === 0 ? "No release matches." :
      past ? "No release on this page: " + num(ans.total) + (ans.total === 1 ? " release" : " releases") + " in all, see newer ones." :
      num(first) + "–" + num(last) + " of " + num(ans.total) + " releases, newest first";
    $("page-of").textContent = ans.total === 0 || past ? "" : "page " + num(Math.floor(ans.offset / ans.limit) + 1) + " of " + num(Math.ceil(ans.total / ans.limit));
    $("newer").disabled = ans.offset === 0;
    $("older").disabled = last >= ans.total;
    if (s.offset === 0) { fresh = new Set(); show("fresh", false); }
  }

  // pwMark is the mark of a release post-processing found passworded
  // (1) or maybe passworded (2: an archive inside the archive).
  function pwMark(p) {
    const m = document.createElement("span");
    m.className = "pw";
    m.textContent = p === 1 ? "passworded" : "maybe passworded";
    return m;
  }

  function go(s) {
    history.pushState(null, "", listURL(s));
    fresh = new Set();
    show("fresh", false);
    shown = new Set();
    loadList(false);
  }

  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    go({ q: $("q").value.trim(), cat: $("cat").value, group: $("group").value.trim(), offset: 0 });
  });
  $("cat").addEventListener("change", () => $("search-form").requestSubmit());
  // Newer from past the end goes to the last page, not one page back.
  $("newer").addEventListener("click", () => {
    const s = state(), total = Number($("summary").dataset.total) || 0;
    s.offset = Math.max(0, Math.min(s.offset - info.page_size, (Math.ceil(total / info.page_size) - 1) * info.page_size));
    go(s);
  });
  $("older").addEventListener("click", () => { const s = state(); s.offset += info.page_size; go(s); });
  $("fresh-show").addEventListener("click", () => { const s = state(); s.offset = 0; go(s); });
  window.addEventListener("popstate", () => route());

  // Links within the page (a release, back to the list) change the view in
  // place, so the live connection stays; a click with a modifier (a new
  // tab) is the browser's.
  let lastList = "/releases";
  document.addEventListener("click", (ev) => {
    const a = ev.target.closest && ev.target.closest("a[data-inpage]");
    if (!a || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
    ev.preventDefault();
    const to = a.id === "back" ? lastList : a.getAttribute("href");
    history.pushState(null, "", to);
    route();
  });

  // --- one release --------------------------------------------------------

  async function loadRelease(id) {
    const n = ++latest;
    let d;
    try {
      d = await api("/releases/api/release?" + new URLSearchParams({ id: id }).toString());
    } catch (e) {
      if (n === latest && e.message !== "signed out") setError("release-error", e.message);
      return;
    }
    if (n !== latest) return;
    setError("release-error", "");
    document.title = d.name + " · switchyard";
    $("rel-name").textContent = d.name;
    $("rel-category").textContent = d.category_name || String(d.category);
    $("rel-size").textContent = bytes(d.size);
    $("rel-files-count").textContent = num(d.files);
    $("rel-files-count").dataset.value = String(d.files);
    const frac = d.parts > 0 ? d.present / d.parts : 0;
    $("rel-complete").textContent = Math.floor(frac * 1000) / 10 + "%";
    $("rel-complete").dataset.value = String(frac);
    $("rel-date").textContent = date(d.date);
    $("rel-groups").textContent = d.groups.join(", ");
    $("rel-poster").textContent = d.poster;
    $("rel-nzb").href = d.nzb;
    const tbody = document.createElement("tbody");
    for (const f of d.file_list) {
      const c = document.createElement("span");
      c.append(bar(f.parts > 0 ? f.present / f.parts : 0), " " + num(f.present) + "/" + num(f.parts));
      const tr = document.createElement("tr");
      tr.append(cell(f.name, "name"), cell(bytes(f.bytes), "num"), cell(c));
      tbody.appendChild(tr);
    }
    $("rel-files").replaceChildren(head(["name", "#size", "parts present"]), tbody);
    $("rel-password").textContent = ["none found", "passworded", "maybe passworded (an archive inside)"][d.password] || String(d.password);
    $("rel-posted").textContent = d.posted_name || "";
    show("rel-posted", !!d.posted_name); show("rel-posted-label", !!d.posted_name);
    $("rel-inner").textContent = d.inner.join(", ");
    show("rel-inner", d.inner.length > 0); show("rel-inner-label", d.inner.length > 0);
    const pb = document.createElement("tbody");
    for (const f of d.par2) {
      const tr = document.createElement("tr");
      tr.append(cell(f.name, "name"), cell(bytes(f.size), "num"));
      pb.appendChild(tr);
    }
    $("rel-par2").replaceChildren(head(["name", "#size"]), pb);
    show("rel-par2-box", d.par2.length > 0);
    $("rel-nfo").textContent = d.nfo;
    show("rel-nfo-box", !!d.nfo);
  }

  // --- live ---------------------------------------------------------------

  // refresh searches again after a change, at most one search in flight
  // and one waiting: a burst of releases costs two searches, not one each.
  function refresh() {
    if (timer) return;
    timer = setTimeout(async () => {
      timer = null;
      if (inflight) { again = true; return; }
      inflight = true;
      await loadList(true);
      inflight = false;
      if (again) { again = false; refresh(); }
    }, 150);
  }

  // onLive takes a release row that arrived on the releases stream: a new
  // release, or a newer row of one (an update).
  function onLive(m) {
    lastSeen = Math.max(lastSeen, m.seq);
    const s = state();
    if (s.id) {
      if (m.key === s.id) loadRelease(s.id);
      return;
    }
    if (s.offset === 0) { refresh(); return; }
    // Another page says how many arrived: a release it shows, or one
    // counted already, updated is no arrival.
    if (!m.key || shown.has(m.key) || fresh.has(m.key)) return;
    fresh.add(m.key);
    $("fresh-show").textContent = num(fresh.size) + (fresh.size === 1 ? " new release" : " new releases") + " — show the newest";
    show("fresh", true);
  }

  // onGone takes rows that left the releases stream (a delete: retention,
  // or the older row of an updated release) or came and went unread (a
  // skipped run): the first page searches again, as the list may have
  // changed; nothing arrived, so another page counts nothing.
  function onGone(m) {
    if (m.type === "skipped") lastSeen = Math.max(lastSeen, m.last || 0);
    const s = state();
    if (!s.id && s.offset === 0) refresh();
  }

  function setConn(st, info) {
    const el = $("conn");
    el.dataset.state = st;
    document.body.classList.toggle("stale", st !== "open");
    if (st === "open") el.textContent = "Live";
    else if (st === "connecting") el.textContent = "Connecting…";
    else if (info.fatal) el.textContent = "Not live: " + (info.reason || "refused");
    else el.textContent = "Disconnected — reconnecting" + (info.retryIn ? " in " + Math.ceil(info.retryIn / 1000) + " s" : "");
  }

  function follow() {
    if (watcher || !window.SwitchyardWatch) return;
    // No apikey option: the cookie carries the key to the gateway.
    watcher = window.SwitchyardWatch.connect({
      scope: info.scope, stream: info.stream, url: "/ws/watch",
      onMessage: onLive,
      onEvent: (m) => { if (m.type === "delete" || m.type === "skipped") onGone(m); },
      onState: setConn,
    });
  }

  // --- start --------------------------------------------------------------

  function route() {
    const s = state();
    if (s.id) {
      view("release");
      ["rel-name", "rel-category", "rel-size", "rel-files-count", "rel-complete", "rel-date", "rel-groups", "rel-poster", "rel-password", "rel-nfo"].forEach((id) => { $(id).textContent = ""; });
      $("rel-files").replaceChildren();
      loadRelease(s.id);
      return;
    }
    view("list");
    document.title = "Releases · switchyard";
    lastList = location.pathname + location.search;
    fillForm(s);
    shown = new Set();
    loadList(false);
  }

  async function start() {
    const r = await fetch("/releases/api/info", { credentials: "same-origin", cache: "no-store" });
    info = await r.json();
    if ($("cat").options.length === 1) fillCategories(info.categories);
    if (!info.signed_in) {
      askKey(info.problem);
      return;
    }
    $("who").textContent = "as " + info.who;
    show("sign-out", info.cookie);
    route();
    follow();
  }

  start().catch((e) => setError("list-error", "start: " + e.message));
})();
