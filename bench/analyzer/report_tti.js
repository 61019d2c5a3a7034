// Time-to-interactive of an HTML report in headless chromium (report_bench.sh runs it):
// from the navigation's start until the page says it is drawn (the script's
// lockscopeReady marker) and has answered a first interaction (a click on "zoom in",
// whose answer is the axis relabelled, and a hover on a hold bar, answered by its
// tooltip). Prints one line per run.
//   node report_tti.js REPORT.html [runs]
'use strict';
const puppeteer = require('puppeteer-core');

(async () => {
  const [report, runsArg] = process.argv.slice(2);
  const runs = +(runsArg || 3);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'],
  });
  try {
    for (let run = 0; run < runs; run++) {
      const page = await browser.newPage();
      await page.setViewport({ width: 1400, height: 900 });
      await page.setCacheEnabled(false);
      const t0 = Date.now();
      await page.goto('file://' + report, { waitUntil: 'domcontentloaded', timeout: 120000 });
      await page.waitForFunction(() => document.documentElement.dataset.ready === '1', { timeout: 120000, polling: 10 });
      const drawn = Date.now() - t0;
      const axisBefore = await page.$eval('#axis', (a) => a.textContent);
      await page.click('#zoom-in');
      await page.waitForFunction((b) => document.getElementById('axis').textContent !== b, { polling: 'raf' }, axisBefore);
      const hold = await page.$('.m.hold');
      if (hold) {
        await hold.hover();
        await page.waitForFunction(() => !document.getElementById('tooltip').hidden, { polling: 'raf' });
      }
      const interactive = Date.now() - t0;
      const m = await page.evaluate(() => ({
        ready: Math.round(window.lockscopeReady),
        nodes: document.getElementsByTagName('*').length,
        blocks: document.querySelectorAll('section.block').length,
        marks: document.querySelectorAll('.m').length,
      }));
      console.log(`run ${run + 1}: drawn ${drawn} ms (script ready at ${m.ready} ms), first interaction answered at ` +
                  `${interactive} ms; ${m.blocks} blocks, ${m.marks} marks, ${m.nodes} elements`);
      await page.close();
    }
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
