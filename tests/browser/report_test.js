// The HTML report as a person sees it, in Debian's chromium driven by puppeteer-core:
// for each capture, the DOM's blocks, lanes, hold bars, wait bars, retry dots and
// anomaly markers (and their data-* values) against what `lockscope analyze --format
// jsonl` says of the same capture; then, on two reports, hovering, pinning, the summary
// table's row click, sorting and filter, zooming the axis, and that nothing was fetched
// and nothing went to the console as an error. A DOM made wrong on purpose must fail.
//
//   node report_test.js LOCKSCOPE CAPTURE...
'use strict';
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const puppeteer = require('puppeteer-core');

const [lockscope, ...captures] = process.argv.slice(2);
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lockscope-browser-'));
let failures = 0;
function fail(capture, what) {
  failures++;
  console.error(`FAIL ${capture}: ${what}`);
}

// What the report must show, from the JSONL alone.
const GROUP_EVENTS = new Set(['quorum', 'multilock']);
function expectations(jsonl) {
  const blocks = new Map();
  for (const line of jsonl.split('\n')) {
    if (!line) continue;
    const e = JSON.parse(line);
    const key = e.lock + '\u0000' + e.db;
    if (!blocks.has(key)) {
      blocks.set(key, { lock: e.lock, db: e.db, lanes: new Set(), holds: [], waits: [], retries: [], anomalies: [], events: 0, waiting: new Map(), holding: new Set() });
    }
    const b = blocks.get(key);
    b.events++;
    // A Redis Cluster's lock is one lock whatever node served the call (lock_server).
    const server = e.lock_server || e.server;
    b.lanes.add((GROUP_EVENTS.has(e.event) ? 'group' : server) + '\u0000' + e.owner);
    const lane = server + '\u0000' + e.owner;
    // A holder first seen by its renewal or release (since_capture_start) held the lock
    // when the capture began: one bar from the capture's start, marked by that event.
    if (e.since_capture_start && !b.holding.has(lane)) {
      b.holds.push('!' + e.event);
      b.holding.add(lane);
    }
    if (e.event === 'acquired') {
      b.holds.push(e.owner);
      b.holding.add(lane);
      b.waiting.delete(lane);
    } else if (e.event === 'released' || e.event === 'force_released' || e.event === 'expired') {
      b.holding.delete(lane);
    } else if (e.event === 'contended') {
      b.retries.push(e.owner);
      // A wait runs from the first failed attempt to the acquisition; no attempt within
      // the TTL it was given (none: 30 s) + 2 s means the waiter gave up.
      const w = b.waiting.get(lane);
      if (!w || e.ts * 1e6 > w.giveUp) b.waits.push(e.owner);
      b.waiting.set(lane, { giveUp: e.ts * 1e6 + (e.ttl_ms !== undefined ? e.ttl_ms * 1000 : 30e6) + 2e6 });
    } else if (e.event === 'gave_up') {
      b.waiting.delete(lane);  // its wait bar ends; the next attempt begins another
    } else if (e.event === 'anomaly') {
      b.anomalies.push(e.owner + ' ' + e.kind);
    }
  }
  return blocks;
}

// Recordings whose truth log holds every acquisition the capture shows (the others
// were joined mid-run, or log one acquisition per RedLock quorum).
const COMPLETE_TRUTH = new Set(['pylock.pcap', 'del_other.pcap']);

const sorted = (a) => a.slice().sort();
function sameMultiset(a, b) {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
}

// What the page shows, per block.
function readDom(page) {
  return page.evaluate(() => {
    const out = [];
    for (const s of document.querySelectorAll('section.block')) {
      const marks = (sel) => Array.from(s.querySelectorAll(sel));
      const bad = [];
      const lines = s.querySelector('template.events').content.textContent.split('\n');
      for (const m of marks('.m')) {
        const d = m.dataset;
        if (d.lock !== s.dataset.lock || d.owner === undefined || !d.event) bad.push('missing data-*: ' + m.outerHTML.slice(0, 120));
        if ((d.event === 'anomaly') !== (d.anomaly !== undefined)) bad.push('data-anomaly: ' + m.outerHTML.slice(0, 120));
        const e = JSON.parse(lines[+d.i]);
        if (e.event !== d.event || e.owner !== d.owner || e.lock !== d.lock || (d.anomaly && e.kind !== d.anomaly)) {
          bad.push('data-* differ from its JSONL line ' + lines[+d.i]);
        }
      }
      out.push({
        lock: s.dataset.lock,
        db: +s.dataset.db,
        lanes: s.querySelectorAll('rect.lane').length,
        holds: marks('.m.hold').map((m) => m.dataset.event === 'acquired' ? m.dataset.owner : '!' + m.dataset.event),
        waits: marks('.m.wait').map((m) => m.dataset.event === 'contended' ? m.dataset.owner : '!' + m.dataset.event),
        retries: marks('.m.retry').map((m) => m.dataset.owner),
        anomalies: marks('.m.anomaly').map((m) => m.dataset.owner + ' ' + m.dataset.anomaly),
        bad,
      });
    }
    return out;
  });
}

// A multiset difference, short: what one side has more of.
function diff(a, b) {
  const count = new Map();
  for (const x of a) count.set(x, (count.get(x) || 0) + 1);
  for (const x of b) count.set(x, (count.get(x) || 0) - 1);
  const more = [], less = [];
  for (const [x, n] of count) { if (n > 0) more.push(`${n}× ${x}`); if (n < 0) less.push(`${-n}× ${x}`); }
  return `${a.length} vs ${b.length}; drawn only: [${more.slice(0, 3)}], expected only: [${less.slice(0, 3)}]`;
}

function compare(name, expected, dom, quiet) {
  let ok = true;
  const check = (cond, what) => { if (!cond) { ok = false; if (!quiet) fail(name, what); } };
  check(dom.length === expected.size, `${dom.length} blocks, the JSONL has ${expected.size} locks`);
  for (const d of dom) {
    const e = expected.get(d.lock + '\u0000' + d.db);
    if (!e) { check(false, `block ${d.lock} db ${d.db} is not in the JSONL`); continue; }
    check(d.lanes === e.lanes.size, `${d.lock}: ${d.lanes} lanes, expected ${e.lanes.size} owners`);
    check(sameMultiset(d.holds, e.holds), `${d.lock}: hold bars vs acquired: ${diff(d.holds, e.holds)}`);
    check(sameMultiset(d.waits, e.waits), `${d.lock}: wait bars vs waits: ${diff(d.waits, e.waits)}`);
    check(sameMultiset(d.retries, e.retries), `${d.lock}: retry dots vs contended: ${diff(d.retries, e.retries)}`);
    check(sameMultiset(d.anomalies, e.anomalies), `${d.lock}: anomaly markers vs anomalies: ${diff(d.anomalies, e.anomalies)}`);
    check(d.bad.length === 0, `${d.lock}: ${d.bad.slice(0, 3).join('; ')}`);
  }
  return ok;
}

async function open(page, file) {
  const url = 'file://' + file;
  page.problems = [];
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => document.documentElement.dataset.ready === '1', { timeout: 5000 });
}

async function interactions(page, name) {
  const check = (cond, what) => { if (!cond) fail(name, what); };
  // Hover the first hold bar: its JSONL fields.
  const hold = await page.$('.m.hold');
  const holdInfo = await hold.evaluate((m) => ({ owner: m.dataset.owner, i: m.dataset.i }));
  await hold.hover();
  const tip = await page.$eval('#tooltip', (t) => ({ hidden: t.hidden, text: t.textContent }));
  check(!tip.hidden, 'hovering a hold bar shows no tooltip');
  check(tip.text.startsWith('acquired') && tip.text.includes('owner: ' + JSON.stringify(holdInfo.owner)) &&
        tip.text.includes('lease_ms: ') && tip.text.includes('"event"') === false && tip.text.includes('event: "acquired"'),
        `tooltip text: ${tip.text}`);
  // Click pins it; moving away keeps it; Escape unpins.
  await hold.click();
  await page.mouse.move(5, 5);
  check(await page.$eval('#tooltip', (t) => !t.hidden && t.classList.contains('pinned')), 'a click does not pin the tooltip');
  await page.keyboard.press('Escape');
  check(await page.$eval('#tooltip', (t) => t.hidden), 'Escape does not unpin');

  // A summary row's click scrolls its block to the top.
  const rows = await page.$$('#summary tbody tr');
  const last = rows[rows.length - 1];
  const blockId = await last.evaluate((r) => r.dataset.block);
  await page.evaluate(() => window.scrollTo(0, 0));
  await last.click();
  await new Promise((r) => setTimeout(r, 100));
  const { top, atBottom } = await page.$eval('#' + blockId, (b) => ({
    top: b.getBoundingClientRect().top,
    atBottom: Math.ceil(window.scrollY + window.innerHeight) >= document.scrollingElement.scrollHeight,
  }));
  // At the top of the window (below the sticky axis), or as far as the page scrolls.
  check((top >= 0 && top < 140) || (atBottom && top >= 0 && top < 900), `the row's block is at ${top}px after the click, not at the top`);
  if (rows.length > 1) check(await page.evaluate(() => window.scrollY > 0), 'the page did not scroll');

  // Sorting by acquisitions, both ways; the filter.
  const acqs = () => page.$$eval('#summary tbody tr', (rs) => rs.map((r) => +r.cells[1].dataset.v));
  await page.click('#summary th:nth-child(2)');
  let v = await acqs();
  check(v.every((x, i) => i === 0 || v[i - 1] >= x), `not sorted descending: ${v}`);
  await page.click('#summary th:nth-child(2)');
  v = await acqs();
  check(v.every((x, i) => i === 0 || v[i - 1] <= x), `not sorted ascending: ${v}`);
  const firstLock = await page.$eval('#summary tbody tr', (r) => r.dataset.lock);
  await page.type('#filter', firstLock);
  const shown = await page.$$eval('#summary tbody tr', (rs) => rs.filter((r) => !r.hidden).map((r) => r.dataset.lock));
  check(shown.length >= 1 && shown.every((l) => l.toLowerCase().includes(firstLock.toLowerCase())), `filter shows ${shown}`);
  await page.$eval('#filter', (f) => { f.value = ''; f.dispatchEvent(new Event('input')); });

  // Zoom: the axis labels change unit (s → ms → µs) and the marks move.
  const units = () => page.$$eval('#axis text', (ts) => ts.map((t) => t.textContent.replace(/^[+\d.]+/, '')));
  const start = await units();
  const seen = new Set(start);
  for (let i = 0; i < 12; i++) {
    await page.click('#zoom-in');
    for (const u of await units()) seen.add(u);
  }
  check(seen.has('s') || seen.has('ms'), `axis units while zooming: ${[...seen]}`);
  check(seen.has('µs') && seen.size >= 2, `the axis never changed unit while zooming: ${[...seen]}`);
  await page.click('#zoom-reset');
  const widths = () => page.$$eval('.m.hold', (ms) => ms.map((m) => +m.getAttribute('width')));
  const before = await widths();
  await page.click('#zoom-in');
  const after = await widths();
  check(after.some((w, i) => w > before[i] * 3 || (w > before[i] && w >= 1000)), `no hold bar grew when zoomed in 4x: ${before} → ${after}`);
  // An anomaly count in the header: its first occurrence, zoomed to and pinned.
  const link = await page.$('a.anomaly-link');
  if (link) {
    await page.click('#zoom-reset');
    const kind = await link.evaluate((a) => a.dataset.anomaly);
    const axisBefore = await page.$eval('#axis', (a) => a.textContent);
    await link.click();
    const pinnedTip = await page.$eval('#tooltip', (t) => ({ pinned: t.classList.contains('pinned') && !t.hidden, text: t.textContent }));
    check(pinnedTip.pinned && pinnedTip.text.startsWith('anomaly ' + kind) && pinnedTip.text.includes(`kind: "${kind}"`),
          `the ${kind} link pins no tooltip: ${pinnedTip.text}`);
    check(await page.$eval('#axis', (a) => a.textContent) !== axisBefore, `the ${kind} link does not zoom`);
    const hl = await page.$eval('.m.hl', (m) => ({ anomaly: m.dataset.anomaly, top: m.getBoundingClientRect().top }));
    check(hl.anomaly === kind && hl.top > 0 && hl.top < 900, `the ${kind} link shows ${JSON.stringify(hl)}`);
    await page.keyboard.press('Escape');
  }
  // Wheel over the axis zooms too.
  await page.click('#zoom-reset');
  const box = await (await page.$('#axis')).boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + 10);
  await page.mouse.wheel({ deltaY: -600 });
  const wheeled = await units();
  check(JSON.stringify(wheeled) !== JSON.stringify(start) ||
        (await page.$eval('#axis text', (t) => t.textContent)) !== '+0s', 'the wheel over the axis does not zoom');
}

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 900 });
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warn') page.problems.push(`console ${m.type()}: ${m.text()}`); });
    page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
    await page.setRequestInterception(true);
    let current = '';
    page.on('request', (r) => {
      if (r.url() === current) return r.continue();
      page.problems.push(`request: ${r.url()}`);
      r.abort();
    });
    let interacted = 0;
    for (const capture of captures) {
      const name = path.relative(process.cwd(), capture);
      const jsonl = execFileSync(lockscope, ['analyze', capture, '--format', 'jsonl'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
      const file = path.join(tmp, path.basename(capture) + '.html');
      execFileSync(lockscope, ['analyze', capture, '--format', 'html', '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
      current = 'file://' + file;
      await open(page, file);
      const expected = expectations(jsonl);
      const dom = await readDom(page);
      let ok = compare(name, expected, dom);
      // Independent truth where the client logged every acquisition inside the capture
      // (redis-py's, recorded from the start): its hold bars are the client's own.
      const truthFile = capture.replace(/\.pcap$/, '.truth.jsonl');
      if (COMPLETE_TRUTH.has(path.basename(capture)) && fs.existsSync(truthFile)) {
        const truth = fs.readFileSync(truthFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l))
          .filter((e) => e.event === 'acquired').map((e) => e.lock + ' ' + e.owner);
        const drawn = dom.flatMap((d) => d.holds.map((o) => d.lock + ' ' + o));
        if (truth.length === 0 || !sameMultiset(drawn, truth)) {
          ok = false;
          fail(name, `hold bars vs the client's own log: ${diff(drawn, truth)}`);
        }
      }
      // The checks must catch a wrong DOM: drop a hold bar (or a retry dot), then
      // relabel an anomaly.
      if (ok && dom.length > 0) {
        await page.evaluate(() => {
          const m = document.querySelector('.m.hold') || document.querySelector('.m.retry');
          m.remove();
          const a = document.querySelector('.m.anomaly');
          if (a) a.dataset.anomaly = 'long_hold' === a.dataset.anomaly ? 'late_renewal' : 'long_hold';
        });
        const broken = await readDom(page);
        const caught = !compare(name, expected, broken, true);
        if (!caught) fail(name, 'a DOM with a mark removed passed the checks');
      }
      if (ok && (name.endsWith('seed-redisson.pcap') || name.endsWith('thirdparty/redlock.pcap'))) {
        await open(page, file);
        await interactions(page, name);
        interacted++;
      }
      for (const p of page.problems) fail(name, p);
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}: ${dom.length} blocks, ${dom.reduce((n, d) => n + d.holds.length, 0)} holds, ` +
                  `${dom.reduce((n, d) => n + d.waits.length, 0)} waits, ${dom.reduce((n, d) => n + d.anomalies.length, 0)} anomalies`);
    }
    // A lock with more marks than --html-detail: coarse, then every mark once zoomed in.
    const stress = captures.find((c) => c.endsWith('recorded/stress.pcap'));
    if (stress) {
      const name = path.relative(process.cwd(), stress) + ' --html-detail 100';
      const check = (cond, what) => { if (!cond) fail(name, what); };
      const jsonl = execFileSync(lockscope, ['analyze', stress, '--format', 'jsonl'], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
      const acquired = jsonl.split('\n').filter((l) => l.includes('"event":"acquired"')).length;
      const file = path.join(tmp, 'stress-coarse.html');
      execFileSync(lockscope, ['analyze', stress, '--format', 'html', '--html-detail', '100', '-o', file], { stdio: 'ignore' });
      current = 'file://' + file;
      await open(page, file);
      const state = () => page.evaluate(() => ({
        coarse: document.querySelectorAll('g.marks .m.coarse').length,
        coarseShown: document.querySelector('g.marks').style.display !== 'none',
        holds: document.querySelectorAll('.m.hold:not(.coarse)').length,
        fineShown: document.querySelector('g.fine').style.display !== 'none',
      }));
      let st = await state();
      check(st.coarse > 0 && st.coarseShown && st.holds === 0, `not coarse at first: ${JSON.stringify(st)}`);
      for (let i = 0; i < 4; i++) await page.click('#zoom-in');
      st = await state();
      check(!st.coarseShown && st.fineShown && st.holds === acquired, `zoomed in: ${JSON.stringify(st)}, ${acquired} acquired`);
      await page.click('#zoom-reset');
      st = await state();
      check(st.coarseShown && !st.fineShown, `zoomed out: ${JSON.stringify(st)}`);
      for (const p of page.problems) fail(name, p);
      console.log(`ok   ${name}: coarse ${st.coarse} cells, ${acquired} holds once zoomed in`);
    }
    if (interacted < 2 && captures.length > 2) fail('interactions', `ran on ${interacted} reports, expected 2`);
  } finally {
    await browser.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  if (failures > 0) {
    console.error(`${failures} failure(s)`);
    process.exit(1);
  }
  console.log(`all ${captures.length} reports match their JSONL`);
})().catch((e) => { console.error(e); process.exit(1); });
