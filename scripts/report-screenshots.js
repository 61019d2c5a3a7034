// Screenshots of HTML reports for the README (run by scripts/report-screenshots.sh).
//   node report-screenshots.js OUT.png REPORT.html [anomaly-kind-to-zoom-to]
'use strict';
const puppeteer = require('puppeteer-core');

(async () => {
  const [out, report, anomaly] = process.argv.slice(2);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1220, height: 760, deviceScaleFactor: 1 });
    await page.emulateMediaFeatures([{ name: 'prefers-color-scheme', value: 'light' }]);
    await page.goto('file://' + report, { waitUntil: 'load' });
    await page.waitForFunction(() => document.documentElement.dataset.ready === '1');
    if (anomaly) {
      // The anomaly's first occurrence, as a click on its count in the header shows it.
      await page.click(`a.anomaly-link[data-anomaly="${anomaly}"]`);
      await page.evaluate(() => window.scrollBy(0, -60));
      const mark = await page.$('.m.hl');
      if (mark) {
        const box = await mark.boundingBox();
        await page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
      }
    } else {
      const hold = await page.$('.m.hold');
      await hold.hover();
    }
    await page.screenshot({ path: out });
  } finally {
    await browser.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
