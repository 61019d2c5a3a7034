<?php
// One process of the held-out Symfony recording (record.sh): symfony/lock 5.4's RedisStore
// (Debian's php-symfony-lock) on predis, unchanged, outside the framework; never used while
// building lockscope (the twelfth held-out set, with Laravel's lock). It contends with the
// other processes on two locks and logs what it did itself, one JSON line per event, to
// stdout, as the node workers do (truth_log.js):
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before the
// command was handed to predis.)
// What the client does: nothing like SET NX. A Lock's key draws a token once
// (base64 of 32 random bytes) and keeps it for every attempt. The store keeps a lock as a
// sorted set (a read/write lock: tokens scored by their expiry in ms, a "__write__" member
// for the writer) and does everything by EVAL of multi-line Lua texts with locals: save()
// drops expired members, refuses (false) when another token is in it, else ZADDs the token
// and "__write__" at now + ttl (now from TIME) and PEXPIREATs the key at the highest score;
// putOffExpiration() the same for a token already in it; delete() ZREMs the token and
// "__write__" (false when the token is not in it) and re-PEXPIREATs what is left; exists()
// asks ZSCORE. Before its first script the store probes whether TIME is allowed with an
// EVAL that SETs `symfony_check_support_time` PX 1. Lock::acquire() is save() with the
// store's initial TTL (300 s) and then, at once, refresh(): putOffExpiration() with the
// lock's TTL; acquire(true) polls save() every 100 ± 10 ms until it wins (no give-up);
// release() is delete() and then exists(); refresh() is putOffExpiration(). One connection
// a process (predis).
//
//   php symfony_lock_worker.php PORT PROC [ROUNDS]
// Needs php-cli, php-symfony-lock, php-predis (Debian).

require_once 'Symfony/Component/Lock/autoload.php';
require_once 'Predis/autoload.php';
require_once __DIR__ . '/truth_log.php';

use Symfony\Component\Lock\Exception\LockConflictedException;
use Symfony\Component\Lock\Key;
use Symfony\Component\Lock\LockFactory;
use Symfony\Component\Lock\Store\RedisStore;

$port = (int) $argv[1];
$proc = $argv[2];
$rounds = (int) ($argv[3] ?? 8);

const TTL_S = 1.0;
// The token of the key being worked on (the store's state in the Key), and when its latest
// acquisition or renewal was sent (its lease runs from there).
$current = ['token' => '', 'lease_from_us' => 0, 'lost' => false];

// The store's calls as the Lock makes them (their arguments and answers).
class LoggedRedisStore extends RedisStore
{
    public function save(Key $key)
    {
        global $current;
        $sent = now_us();
        try {
            parent::save($key);
        } catch (LockConflictedException $e) {
            $current['token_of_try'] = $key->getState(RedisStore::class);
            log_event(['event' => 'attempt', 'lock' => (string) $key, 'owner' => $key->getState(RedisStore::class), 'reply' => null, 'sent_us' => $sent]);
            throw $e;
        }
        $current['token'] = $key->getState(RedisStore::class);
        $current['lease_from_us'] = $sent;
        log_event(['event' => 'attempt', 'lock' => (string) $key, 'owner' => $current['token'], 'reply' => 'OK', 'sent_us' => $sent]);
        log_event(['event' => 'acquired', 'lock' => (string) $key, 'owner' => $current['token']]);
    }

    public function putOffExpiration(Key $key, float $ttl)
    {
        global $current;
        $sent = now_us();
        try {
            parent::putOffExpiration($key, $ttl);
        } catch (LockConflictedException $e) {
            log_event(['event' => 'extend_refused', 'lock' => (string) $key, 'owner' => $key->getState(RedisStore::class), 'reply' => 0, 'sent_us' => $sent]);
            throw $e;
        }
        $current['lease_from_us'] = $sent;
        log_event(['event' => 'extended', 'lock' => (string) $key, 'owner' => $key->getState(RedisStore::class), 'reply' => 1, 'sent_us' => $sent]);
    }

    public function delete(Key $key)
    {
        global $current;
        $sent = now_us();
        parent::delete($key);
        // The script answers false when the token had gone (its lease ran out): the worker
        // knows which holds outlived their lease (it slept past them).
        log_event(['event' => $current['lost'] ? 'release_refused' : 'released', 'lock' => (string) $key,
                   'owner' => $key->getState(RedisStore::class), 'reply' => $current['lost'] ? 0 : 1, 'sent_us' => $sent]);
    }
}

$redis = new Predis\Client(['host' => '127.0.0.1', 'port' => $port]);
$factory = new LockFactory(new LoggedRedisStore($redis));

for ($i = 0; $i < $rounds; ++$i) {
    $name = $i % 2 === 0 ? 'orders' : 'stock';
    $lock = $factory->createLock("lock:$name", TTL_S, false);
    $current['lost'] = false;
    $ok = false;
    if ($name === 'orders' && $i % 6 !== 4) {
        // Symfony's own poller: acquire(true), every 100 ± 10 ms until it wins.
        $ok = $lock->acquire(true);
    } else {
        // A caller's own loop of single tries (acquire(false)): stock 4 tries 150 ms
        // apart, and one acquisition in six a single try.
        $tries = $i % 6 === 4 || $i % 6 === 5 ? 1 : 4;
        for ($k = 0; $k < $tries && !$ok; ++$k) {
            if ($k > 0) usleep(150000);
            $ok = $lock->acquire(false);
        }
        if (!$ok) {
            log_event(['event' => 'gave_up', 'lock' => "lock:$name", 'owner' => $current['token_of_try'] ?? null] + ($tries === 1 ? ['single_try' => true] : []));
        }
    }
    if (!$ok) {
        usleep(random_int(0, 60000));
        continue;
    }
    if ($i % 5 === 4) {
        // Outlives its lease: the key expires TTL_S after its latest refresh; the release
        // then finds its token gone.
        usleep((int) (TTL_S * 1000 + 200 + random_int(0, 200)) * 1000);
        log_event(['event' => 'expired', 'lock' => "lock:$name", 'owner' => $current['token'], 't_us' => $current['lease_from_us'] + (int) (TTL_S * 1000000)]);
        $current['lost'] = true;
        $lock->release();
    } elseif ($i % 4 === 1) {
        // A longer hold, refreshed twice.
        for ($k = 0; $k < 2; ++$k) {
            usleep(random_int(500000, 600000));
            $lock->refresh();
        }
        usleep(random_int(100000, 200000));
        $lock->release();
    } else {
        usleep(random_int(30000, 180000));
        $lock->release();
    }
    usleep(random_int(0, 60000));
}
$redis->disconnect();
