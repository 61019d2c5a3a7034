// Shared by the node scenarios: a wall clock in microseconds and a JSONL truth writer.
// The clock is Date.now() calibrated once against the monotonic clock at a millisecond
// tick, so every process's timestamps are comparable with tcpdump's to a few µs.
'use strict';
const fs = require('node:fs');

function calibratedClock() {
  const first = Date.now();
  let now = first;
  while (now === first) now = Date.now();  // wait for the tick: the ms boundary is exact
  const base = BigInt(now) * 1000n - process.hrtime.bigint() / 1000n;
  return () => Number(base + process.hrtime.bigint() / 1000n);
}

// One JSON object per line, written synchronously so a killed process loses nothing.
function truthLog(path, common) {
  const fd = fs.openSync(path, 'a');
  const clock = calibratedClock();
  const log = (event, fields) => {
    const line = JSON.stringify({ t_us: clock(), ...common, event, ...fields });
    fs.writeSync(fd, line + '\n');
  };
  log.clock = clock;
  return log;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const endpoint = (stream) => (stream && stream.localPort ? `${stream.localAddress.replace(/^::ffff:/, '')}:${stream.localPort}` : '');

module.exports = { truthLog, sleep, endpoint };
