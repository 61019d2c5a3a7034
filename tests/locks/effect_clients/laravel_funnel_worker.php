<?php
// One process of the held-out Laravel funnel recording (record.sh laravel_funnel): Laravel's
// concurrency limiter (Illuminate\Redis\Limiters\ConcurrencyLimiter 8.83, Debian's
// php-illuminate-redis, what `Redis::funnel($name)->limit(1)->block($s)->then(...)` builds)
// over a RedisManager with the predis driver, unchanged, outside the framework; never used
// while building lockscope (the twenty-eighth held-out set). It contends with the other
// processes on two limiters and logs what it did itself, one JSON line per event, to
// stdout, as the other workers do (truth_log.js):
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"released"|"release_refused"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before the
// command was handed to predis.)
// What the client does (Limiters/ConcurrencyLimiter.php): a limiter of N slots has the keys
// NAME1..NAMEn; block($timeout, $callback) draws one id (Str::random(20)) for all its
// attempts and sends, each attempt, an EVAL of
//   for index, value in pairs(redis.call('mget', unpack(KEYS))) do
//       if not value then redis.call('set', KEYS[index], ARGV[3], "EX", ARGV[2])
//           return ARGV[1]..index end end
// with KEYS the slot keys and ARGV [NAME, releaseAfter (seconds), id]: it answers the slot
// it took (NAME..index, the slot key's name) or nil when every slot is held. After a nil it
// gives up (LimiterTimeoutException) when time() - $timeout >= its start (whole seconds:
// no sleep after that last refusal), else sleeps 250 ms and tries again; block(0, ...) is
// one try. Once the callback returns (or throws) it releases the slot by an EVAL of
// `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else
// return 0 end` (the library ignores the answer: 0 when the slot had expired). No renewal.
// Both limiters here have one slot (limit 1): the lock of each is its one slot key.
// Holders killed with SIGKILL: each life of the loop runs in a child process (one predis
// connection) whose lines come back through a pipe; p1's and p3's children are killed in
// the middle of the hold of their kill round, when that round's try won (one given up is
// not: in the committed recording only p1's was), the slot expiring releaseAfter after its
// SET (logged by the parent then), and a new child goes on with the next rounds over a new
// connection.
//
//   php laravel_funnel_worker.php PORT PROC [ROUNDS]
//   php laravel_funnel_worker.php PORT PROC ROUNDS --life FROM KILL_ROUND   (a child)
// Needs php-cli, php-illuminate-redis, php-predis (Debian).

require_once 'Illuminate/Redis/autoload.php';
require_once 'Predis/autoload.php';
require_once __DIR__ . '/truth_log.php';

use Illuminate\Contracts\Redis\LimiterTimeoutException;
use Illuminate\Redis\Limiters\ConcurrencyLimiter;
use Illuminate\Redis\RedisManager;

$port = (int) $argv[1];
$proc = $argv[2];
$rounds = (int) ($argv[3] ?? 8);

// reports: waits up to 2 s (whole seconds by time(): 2-3 s), its slot kept 2 s; exports:
// up to 1 s, its slot kept 1 s, so its waiters give up more often and may leave it free.
const LIMITERS = ['reports' => ['wait_s' => 2, 'release_after_s' => 2], 'exports' => ['wait_s' => 1, 'release_after_s' => 1]];

// The limiter's two calls, logged as it makes them (their arguments and answers); the loop,
// the sleep and the give-up are Laravel's own.
class LoggedConcurrencyLimiter extends ConcurrencyLimiter
{
    public $id = null;  // the id of the latest attempt: block() draws it
    public $slot = null;  // [slot key, id, sent_us] of the hold, while held
    public $refusedOn = null;  // the slot key refused since this block() began

    protected function acquire($id)
    {
        $this->id = $id;
        $sent = now_us();
        $slot = parent::acquire($id);
        // With one slot the script names it when it takes it; a refusal names none.
        $key = $slot ?: $this->name . '1';
        log_event(['event' => 'attempt', 'lock' => $key, 'owner' => $id, 'reply' => $slot ? 'OK' : null, 'sent_us' => $sent]);
        if ($slot) {
            $this->slot = [$slot, $id, $sent];
            $this->refusedOn = null;
            log_event(['event' => 'acquired', 'lock' => $slot, 'owner' => $id]);
        } else {
            $this->refusedOn = $key;
        }
        return $slot;
    }

    protected function release($key, $id)
    {
        // The library's own script and call (its answer is dropped by Laravel: read it here).
        $sent = now_us();
        $reply = (int) $this->redis->eval($this->releaseScript(), 1, $key, $id);
        log_event(['event' => $reply === 1 ? 'released' : 'release_refused', 'lock' => $key, 'owner' => $id,
                   'reply' => $reply, 'sent_us' => $sent]);
        $this->slot = null;
    }
}

if (($argv[4] ?? '') !== '--life') {
    // The parent: runs the rounds in children, killing p1's and p3's once mid-hold.
    $kill = ['p1' => intdiv($rounds, 3), 'p3' => intdiv(2 * $rounds, 3) + 1][$proc] ?? -1;
    run_rounds_in_children((string) $port, $rounds, $kill, function (array $o): void {
        // Mid-hold, nothing released: the slot runs out its EX.
        [$key, $owner, $sent] = $o['slot'];
        log_event(['event' => 'expired', 'lock' => $key, 'owner' => $owner,
                   't_us' => $sent + $o['release_after_s'] * 1000000, 'killed' => true]);
    });
    exit(0);
}

// A child: rounds FROM.. of the loop, over its own connection.
$from = (int) $argv[5];
$killRound = (int) $argv[6];
$redis = new RedisManager(null, 'predis', ['default' => ['host' => '127.0.0.1', 'port' => $port, 'database' => 0]]);
$connection = $redis->connection();
for ($i = $from; $i < $rounds; ++$i) {
    $name = $i % 2 === 0 ? 'reports' : 'exports';
    $policy = LIMITERS[$name];
    $limiter = new LoggedConcurrencyLimiter($connection, 'funnel:' . $name, 1, $policy['release_after_s']);
    // One round in six is a single try (block(0)); the rest wait.
    $once = $i % 6 === 5;
    try {
        $limiter->block($once ? 0 : $policy['wait_s'], function () use ($limiter, $i, $killRound, $policy) {
            if ($i === $killRound) {
                fwrite(STDOUT, json_encode(['event' => 'kill_me', 'round' => $i, 'slot' => $limiter->slot,
                                            'release_after_s' => $policy['release_after_s']]) . "\n");
                fflush(STDOUT);
                sleep(30);
            }
            if ($i % 7 === 3) {
                // Outlives its slot's lease: the key expires release_after_s after its SET;
                // the release then answers 0.
                usleep(($policy['release_after_s'] * 1000 + 200 + random_int(0, 200)) * 1000);
                [$key, $owner, $sent] = $limiter->slot;
                log_event(['event' => 'expired', 'lock' => $key, 'owner' => $owner,
                           't_us' => $sent + $policy['release_after_s'] * 1000000]);
            } else {
                usleep(random_int(20000, 400000));
            }
        });
    } catch (LimiterTimeoutException $e) {
        log_event(['event' => 'gave_up', 'lock' => $limiter->refusedOn, 'owner' => $limiter->id] + ($once ? ['single_try' => true] : []));
    }
    usleep(random_int(0, 60000));
}
$connection->disconnect();
