<?php
// One process of the held-out malkusch/lock recordings (record.sh: malkusch_mutex on one
// redis-server, malkusch_redlock on three): malkusch/lock 2.2.1's RedisMutex (Debian's
// php-malkusch-lock), unchanged, through PredisMutex (predis, one server) or PHPRedisMutex
// (the phpredis extension, three servers: its Redlock quorum); never used while building
// lockscope (the eighteenth held-out set). It contends with the other processes on three
// locks and logs what it did itself, one JSON line per event, to stdout, as the other
// workers do (truth_log.js):
//   {"t_us", "proc", "event": "attempt"|"acquired"|"released"|"gave_up"|"expired"|"group"|"cleanup", "lock", "owner", "server", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before the
// command was handed to the client library.) Each line names the server it is about: on
// three servers each server's key is a lock of its own on the wire, and the quorum is what
// joins them: a line {"event":"group","outcome":"acquired"} when synchronized() got its
// majority, {"event":"group","outcome":"failed"} for each attempt that did not (its
// clean-up follows).
// What the client does (classes/mutex/SpinlockMutex.php, RedisMutex.php, util/Loop.php):
// the key is "lock_" + name; synchronized() loops until the mutex's timeout (whole seconds,
// here 1) has passed since its first attempt; each attempt draws a new token
// (bin2hex(random_bytes(16))) and sends `SET key token EX timeout+1 NX` to every server in
// turn; without a majority (or past the lease) it sends the release script
// `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else
// return 0 end` by EVAL with that token to every server (the attempt's clean-up, logged as
// "cleanup" with its reply; a 1 there deletes what that attempt had taken on that server:
// logged as released) and sleeps a random 10-20 ms the first time, growing by 1.25 each
// time up to 0.5 s, never past the deadline; at the deadline it gives up (TimeoutException)
// without a last attempt. unlock() sends the same script to every server. There is no
// renewal. Each process has one connection per server.
// Holders killed with SIGKILL: each life of the loop runs in a child process whose lines
// come back through a pipe; the child of p1 and of p3 is killed once in the middle of a
// hold (its keys expire timeout+1 s after their SET, logged by the parent as expired at
// that time), and a new child goes on with the next rounds over new connections.
//
//   php malkusch_lock_worker.php PORT[,PORT...] PROC [ROUNDS]
//   php malkusch_lock_worker.php PORT[,PORT...] PROC ROUNDS --life FROM KILL_ROUND   (a child)
// Needs php-cli, php-malkusch-lock, php-predis, php-redis (Debian).

require_once 'Malkusch/Lock/autoload.php';
require_once 'Predis/autoload.php';
require_once __DIR__ . '/truth_log.php';

use malkusch\lock\exception\TimeoutException;
use malkusch\lock\mutex\PHPRedisMutex;
use malkusch\lock\mutex\PredisMutex;

$ports = array_map('intval', explode(',', $argv[1]));
$proc = $argv[2];
$rounds = (int) ($argv[3] ?? 8);

const TIMEOUT_S = 1;  // the mutex's timeout; its keys' lease is TIMEOUT_S + 1 s

// The calls RedisMutex makes, logged as it makes them (their arguments and answers); the
// loop, the quorum and the clean-up are malkusch/lock's own.
trait LoggedCalls
{
    public $servers = [];  // spl_object_id(connection) -> "ip:port"
    public $held = [];  // server -> [lock, owner, sent_us] of this attempt's SETs that took
    private $releasing = false;
    private $failed = null;  // the token of the latest quorum attempt logged as failed
    private $refused = [];  // server -> lock refused since this process last took it there

    protected function add($redisAPI, string $key, string $value, int $expire): bool
    {
        $server = $this->servers[spl_object_id($redisAPI)];
        $sent = now_us();
        $ok = parent::add($redisAPI, $key, $value, $expire);
        log_event(['event' => 'attempt', 'lock' => $key, 'owner' => $value, 'server' => $server,
                   'reply' => $ok ? 'OK' : null, 'sent_us' => $sent]);
        if ($ok) {
            log_event(['event' => 'acquired', 'lock' => $key, 'owner' => $value, 'server' => $server]);
            $this->held[$server] = [$key, $value, $sent];
            unset($this->refused[$server]);
        } else {
            $this->refused[$server] = $key;
        }
        return $ok;
    }

    protected function evalScript($redisAPI, string $script, int $numkeys, array $arguments)
    {
        $server = $this->servers[spl_object_id($redisAPI)];
        if (!$this->releasing && count($this->servers) > 1 && $this->failed !== $arguments[1]) {
            // The attempt's clean-up: it did not get its majority, a quorum attempt that failed.
            $this->failed = $arguments[1];
            log_event(['event' => 'group', 'outcome' => 'failed', 'lock' => $arguments[0], 'owner' => $arguments[1],
                       'servers' => array_keys($this->held)]);
        }
        $sent = now_us();
        $reply = parent::evalScript($redisAPI, $script, $numkeys, $arguments);
        $deleted = (int) $reply === 1;
        if ($this->releasing || $deleted) {
            log_event(['event' => 'released', 'lock' => $arguments[0], 'owner' => $arguments[1], 'server' => $server,
                       'reply' => (int) $reply] + ($this->releasing ? [] : ['cleanup' => true]) + ['sent_us' => $sent]);
        } else {
            log_event(['event' => 'cleanup', 'lock' => $arguments[0], 'owner' => $arguments[1], 'server' => $server,
                       'reply' => (int) $reply, 'sent_us' => $sent]);
        }
        if ($deleted) {
            unset($this->held[$server]);
        }
        return $reply;
    }

    protected function lock(): void
    {
        try {
            parent::lock();
        } catch (TimeoutException $e) {
            foreach ($this->refused as $server => $key) {
                log_event(['event' => 'gave_up', 'lock' => $key, 'server' => $server]);
            }
            throw $e;
        }
        $this->refused = [];
        if (count($this->servers) > 1) {
            $any = reset($this->held);
            log_event(['event' => 'group', 'outcome' => 'acquired', 'lock' => $any[0], 'owner' => $any[1], 'servers' => array_keys($this->held)]);
        }
    }

    protected function unlock(): void
    {
        $this->releasing = true;
        try {
            parent::unlock();
        } finally {
            $this->releasing = false;
        }
    }
}

class LoggedPredisMutex extends PredisMutex
{
    use LoggedCalls;
}

class LoggedPHPRedisMutex extends PHPRedisMutex
{
    use LoggedCalls;
}

// orders is taken twice as often as stock or ledger: waits and give-ups on it, free
// stretches on the others.
$names = ['orders', 'orders', 'stock', 'ledger'];

if (($argv[4] ?? '') !== '--life') {
    // The parent: runs the rounds in children, killing p1's and p3's once mid-hold.
    $kill = ['p1' => intdiv($rounds, 3), 'p3' => intdiv(2 * $rounds, 3)][$proc] ?? -1;
    run_rounds_in_children($argv[1], $rounds, $kill, function (array $o): void {
        // Mid-hold, nothing released: each key it holds runs out its lease.
        foreach ($o['held'] as $server => [$key, $owner, $sent]) {
            log_event(['event' => 'expired', 'lock' => $key, 'owner' => $owner, 'server' => $server,
                       't_us' => $sent + (TIMEOUT_S + 1) * 1000000, 'killed' => true]);
        }
    });
    exit(0);
}

// A child: rounds FROM.. of the loop, over its own connections.
$from = (int) $argv[5];
$killRound = (int) $argv[6];
$multi = count($ports) > 1;
$clients = [];
$servers = [];
foreach ($ports as $port) {
    if ($multi) {
        $c = new Redis();
        $c->connect('127.0.0.1', $port);
    } else {
        $c = new Predis\Client(['host' => '127.0.0.1', 'port' => $port]);
        $c->connect();
    }
    $clients[] = $c;
    $servers[spl_object_id($c)] = "127.0.0.1:$port";
}
for ($i = $from; $i < $rounds; ++$i) {
    $name = $names[random_int(0, count($names) - 1)];
    $mutex = $multi ? new LoggedPHPRedisMutex($clients, $name, TIMEOUT_S) : new LoggedPredisMutex($clients, $name, TIMEOUT_S);
    $mutex->servers = $servers;
    try {
        $mutex->synchronized(function () use ($mutex, $i, $killRound): void {
            if ($i === $killRound) {
                fwrite(STDOUT, json_encode(['event' => 'kill_me', 'round' => $i, 'held' => $mutex->held]) . "\n");
                fflush(STDOUT);
                sleep(30);
            }
            usleep(random_int(20000, 400000));
        });
    } catch (TimeoutException $e) {
        // gave up: logged by lock()
    }
    usleep(random_int(0, 80000));
}
