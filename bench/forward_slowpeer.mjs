// The slow-peer workload of `switchyard bench forward` on the reference
// queue, run the same way bench.RunForward runs it on ours: the same items,
// marker policy, pacing and accounting. The anchor folder provides
// forwardQueue.mjs; its bench.mjs has no such workload.
// Arguments: queue module URL, rate, round trip (ms), push time (ms).
const [url, rate, rttMs, durMs] = process.argv.slice(1);
const { PeerForwardQueue } = await import(url);
const now = () => Number(process.hrtime.bigint()) / 1e9;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const payload = 'x'.repeat(64);
function delivery(i) {
  return { kind: 'delivery', userId: i % 1000, appUid: null, subId: 'sub-' + (i % 64),
    event: { id: 'ev-' + i, subject: 'fs:uid-' + (i % 5000) + ':write', op: 'write', uid: 'uid-' + (i % 5000),
      path: '/user' + (i % 1000) + '/docs/file-' + i + '.txt', self: false, ts: 1764000000000 + i, seq: i, data: payload } };
}
const pending = new Set();
let dropped = 0, droppedDeliveries = 0, markers = 0, delivered = 0;
const onOverflow = (peer, items) => {
  dropped += items.length;
  const out = [];
  for (const it of items) {
    if (it.kind !== 'delivery') continue;
    if (it.event.op === 'gap') { pending.delete(peer + '|' + it.subId); continue; }
    droppedDeliveries++;
    if (it.ackRequired) continue;
    const k = peer + '|' + it.subId;
    if (pending.has(k)) continue;
    pending.add(k); markers++;
    out.push({ ...it, event: { id: it.event.id, subject: it.event.subject, op: 'gap', reason: 'backlog_overflow', ts: it.event.ts } });
  }
  return out;
};
const send = (peer, items) => new Promise((r) => setTimeout(() => {
  for (const it of items) {
    if (it.kind === 'delivery' && it.event.op === 'gap') pending.delete(peer + '|' + it.subId);
    else delivered++;
  }
  r();
}, Number(rttMs)));
const q = new PeerForwardQueue({ send, onOverflow });
const t0 = now();
let pushed = 0;
for (;;) {
  const elapsed = Math.min(now() - t0, Number(durMs) / 1000);
  for (const want = Math.floor(elapsed * Number(rate)); pushed < want; pushed++) q.push('peer-slow', delivery(pushed));
  if (elapsed >= Number(durMs) / 1000) break;
  await sleep(1);
}
while (delivered + droppedDeliveries < pushed) { await q.flushAll(); await sleep(1); }
const s = now() - t0;
q.stop();
console.log(JSON.stringify({ workload: 'slow-peer', items: pushed, seconds: s, items_per_s: delivered / s, dropped, markers, delivered }));
