<?php
// One process of the held-out Laravel recording (record.sh): Laravel's Redis lock
// (Illuminate\Cache\RedisLock 8.83, Debian's php-illuminate-cache) through RedisStore over
// a RedisManager with the predis driver, unchanged, outside the framework; never used while
// building lockscope (the twelfth held-out set, the first not from npm). It contends with
// the other processes on two locks and logs what it did itself, one JSON line per event,
// to stdout, as the node workers do (truth_log.js):
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"release_refused"|"force_released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before the
// command was handed to predis.)
// What the client does: a Lock draws its owner once (Str::random(), 16 characters) and
// keeps it for every attempt. acquire() is `SET key owner EX seconds NX` (whole seconds);
// get() is one acquire(); block($s) repeats acquire(), sleeping sleepMilliseconds (250 by
// default) after each refusal, and gives up (LockTimeoutException) after a sleep once $s
// seconds have passed, without trying again. release() is an EVAL of the text
// `if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else
// return 0 end` (false on a 0); forceRelease() a bare `DEL key`; restoreLock($name,
// $owner) makes a Lock with that owner, which Laravel uses to release from another process
// (a queued job's lock). There is no renewal. Each process has one connection (predis);
// a restoring child process has its own.
//
//   php laravel_lock_worker.php PORT PROC [ROUNDS]
//   php laravel_lock_worker.php PORT PROC --restore-release NAME OWNER   (the child)
// Needs php-cli, php-illuminate-cache, php-illuminate-redis, php-predis (Debian).

require_once 'Illuminate/Cache/autoload.php';
require_once 'Illuminate/Redis/autoload.php';
require_once 'Predis/autoload.php';
require_once __DIR__ . '/truth_log.php';

use Illuminate\Cache\RedisLock;
use Illuminate\Cache\RedisStore;
use Illuminate\Contracts\Cache\LockTimeoutException;
use Illuminate\Redis\RedisManager;

$port = (int) $argv[1];
$proc = $argv[2];

const TTL_S = 1;
$current = ['set_us' => 0];

// The lock as RedisStore::lock() builds it for a predis connection, with its calls logged
// as the Lock makes them (their arguments and answers); get() and block() are Laravel's own.
class LoggedRedisLock extends RedisLock
{
    public function acquire()
    {
        global $current;
        $sent = now_us();
        $ok = parent::acquire();
        log_event(['event' => 'attempt', 'lock' => $this->name, 'owner' => $this->owner, 'reply' => $ok ? 'OK' : null, 'sent_us' => $sent]);
        if ($ok) {
            $current['set_us'] = $sent;
            log_event(['event' => 'acquired', 'lock' => $this->name, 'owner' => $this->owner]);
        }
        return $ok;
    }

    public function release()
    {
        $sent = now_us();
        $ok = parent::release();
        log_event(['event' => $ok ? 'released' : 'release_refused', 'lock' => $this->name, 'owner' => $this->owner, 'reply' => $ok ? 1 : 0, 'sent_us' => $sent]);
        return $ok;
    }

    public function forceRelease()
    {
        $sent = now_us();
        parent::forceRelease();
        log_event(['event' => 'force_released', 'lock' => $this->name, 'owner' => $this->owner, 'sent_us' => $sent]);
    }
}

class LoggedRedisStore extends RedisStore
{
    public function lock($name, $seconds = 0, $owner = null)
    {
        return new LoggedRedisLock($this->lockConnection(), $this->prefix . $name, $seconds, $owner);
    }
}

$redis = new RedisManager(null, 'predis', ['default' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0]]);
$store = new LoggedRedisStore($redis, 'app_cache');

if (($argv[3] ?? '') === '--restore-release') {
    // Another process releases a lock it did not take, by its owner (Cache::restoreLock).
    $store->restoreLock($argv[4], $argv[5])->release();
    exit(0);
}

$rounds = (int) ($argv[3] ?? 8);
for ($i = 0; $i < $rounds; ++$i) {
    $name = $i % 2 === 0 ? 'orders' : 'stock';
    $lock = $store->lock($name, TTL_S);
    $key = $store->getPrefix() . $name;
    // orders waits up to 3 s, polling every 250 ms (Laravel's default); stock up to 1 s
    // every 100 ms, so its waiters leave it free longer than the idle threshold and some
    // give up.
    if ($name === 'stock') {
        $lock->betweenBlockedAttemptsSleepFor(100);
    }
    // One acquisition in six is a single try (get()), the rest wait (block()).
    $once = $i % 6 === 5;
    if ($once) {
        $ok = $lock->get();
    } else {
        try {
            $ok = $lock->block($name === 'stock' ? 1 : 3);
        } catch (LockTimeoutException $e) {
            $ok = false;
        }
    }
    if (!$ok) {
        log_event(['event' => 'gave_up', 'lock' => $key, 'owner' => $lock->owner()] + ($once ? ['single_try' => true] : []));
        usleep(random_int(0, 60000));
        continue;
    }
    if ($i % 5 === 4) {
        // Outlives its lease: the key expires TTL_S after its SET; the release then answers 0.
        usleep((TTL_S * 1000 + 200 + random_int(0, 200)) * 1000);
        log_event(['event' => 'expired', 'lock' => $key, 'owner' => $lock->owner(), 't_us' => $current['set_us'] + TTL_S * 1000000]);
        $lock->release();
    } elseif ($i % 4 === 1) {
        // Released by another process that restores the lock by its owner.
        usleep(random_int(50000, 200000));
        $cmd = [PHP_BINARY, __FILE__, (string) $port, $proc, '--restore-release', $name, $lock->owner()];
        // Its truth lines come back through a pipe and are passed on whole.
        $child = proc_open($cmd, [1 => ['pipe', 'w'], 2 => STDERR], $pipes);
        $lines = stream_get_contents($pipes[1]);
        fclose($pipes[1]);
        proc_close($child);
        fwrite(STDOUT, $lines);
        fflush(STDOUT);
    } else {
        usleep(random_int(30000, 180000));
        if ($i % 7 === 3) {
            $lock->forceRelease();
        } else {
            $lock->release();
        }
    }
    usleep(random_int(0, 60000));
}
$redis->connection()->disconnect();
