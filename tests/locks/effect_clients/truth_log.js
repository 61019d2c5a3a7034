// What every worker of record.sh shares: its arguments (PORT PROC [ROUNDS], 8 rounds by
// default) and its truth log, one JSON line per event on stdout, stamped with the epoch
// in microseconds when the line is written (the capture's clock) and the process's name.
'use strict';
const port = Number(process.argv[2]);
const proc = process.argv[3];
const rounds = Number(process.argv[4] || 8);
const now_us = () => Math.round((performance.timeOrigin + performance.now()) * 1000);
const log = (o) => process.stdout.write(JSON.stringify({ t_us: now_us(), proc, ...o }) + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Runs this process's rounds in child processes of `script` (its argv then ends
// `rounds START`): a child killed with SIGKILL in round killRound is followed by a new
// one from the round after. Each child gets the port argument as given: several servers'
// ports are a comma-separated list, not a number.
async function superviseRounds(script, killRound) {
  const { spawn } = require('child_process');
  let start = 0;
  while (start < rounds) {
    const child = spawn(process.execPath, [script, process.argv[2], proc, String(rounds), 'rounds', String(start)],
                        { stdio: ['ignore', 'inherit', 'inherit'] });
    const code = await new Promise((r) => child.on('exit', (c, sig) => r(sig || c)));
    if (code === 'SIGKILL') { start = killRound + 1; continue; }
    if (code !== 0) throw new Error(`child exited with ${code}`);
    break;
  }
}

// The same for a worker that is its own child: with `rounds FROM` it runs child(FROM),
// else it supervises.
function runRoundsInChildren(worker, killRound, child) {
  const main = process.argv[5] === 'rounds' ? () => child(Number(process.argv[6])) : () => superviseRounds(worker, killRound);
  main().catch((e) => {
    log({ event: 'error', message: String(e && e.stack) });
    process.exit(1);
  });
}

// The servers of a Redlock worker (PORT a comma-separated list): each process lists them
// from its own one on (p1 the first, p2 the second...), so attempts sent at once may split
// a quorum's servers between them. On one server a log line names none (`at` adds
// nothing); on several each names its server, each server's key a lock of its own on the wire.
function processServers() {
  const ports = process.argv[2].split(',');
  const first = (Number(proc.slice(1)) - 1) % ports.length;
  const servers = [...ports.slice(first), ...ports.slice(0, first)].map((p) => `127.0.0.1:${p}`);
  const quorum = servers.length > 1;
  return { servers, quorum, at: (server) => (quorum ? { server } : {}) };
}

// A node-redlock worker's locks: for each policy name a Redlock retrying by that policy and
// one trying once (NAME_once, retryCount 0), each telling onValue of the random value it
// draws for a lock() call (the log's owner).
function redlocksOfPolicies(Redlock, clients, policies, onValue) {
  const locks = {};
  for (const [name, policy] of Object.entries(policies)) {
    for (const [suffix, options] of [['', policy], ['_once', { ...policy, retryCount: 0 }]]) {
      const redlock = new Redlock(clients, options);
      const draw = redlock._random.bind(redlock);
      redlock._random = () => { const value = draw(); onValue(value); return value; };
      locks[name + suffix] = redlock;
    }
  }
  return locks;
}

module.exports = { port, proc, rounds, now_us, log, sleep, superviseRounds, runRoundsInChildren, processServers,
                   redlocksOfPolicies };
