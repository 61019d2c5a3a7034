<?php
// One process of the held-out symfony/semaphore recording (record.sh symfony_semaphore):
// symfony/semaphore 5.4's RedisStore (Debian's php-symfony-semaphore) on predis, unchanged,
// outside the framework; never used while building lockscope (the twenty-eighth held-out
// set). It contends with the other processes on two semaphores (1 and 2 permits) and logs
// what it did itself, one JSON line per event, to stdout, as the other workers do
// (truth_log.js):
//   {"t_us", "proc", "event": "attempt"|"acquired"|"gave_up"|"extended"|"released"|"expired", "lock", "owner", ...}
// (t_us when the line is written, after the reply came; sent_us, on calls, just before the
// command was handed to predis.)
// What the client does (Store/RedisStore.php, Semaphore.php): a semaphore on RESOURCE is
// called with the one key `{RESOURCE}` (KEYS[1]); its scripts build its two sorted sets in
// Lua, `{RESOURCE}:weight` (member -> weight) and `{RESOURCE}:time` (member -> expiry, the
// client's time() in whole seconds + ttl); the member is a token drawn once per Semaphore
// object (base64 of 32 random bytes). acquire() is one EVAL of the save script, ARGV
// [token, time(), ttl, limit, weight]: it drops the members whose expiry has passed, answers
// 1 when the token is already in, else adds it when the weights in stay within the limit
// (answering 1; nil when they would not), and sets both sets' EXPIREAT to the latest expiry
// + 10 s. refresh() is the putOffExpiration script, ARGV [time() + ttl, token]: a ZADD of the
// new expiry answering 0 when the member was there (renewed; 1: it had gone, undone at
// once). release() is a script of two ZREMs. The library never waits: the loop here tries
// again every interval until a patience, as a user of it writes. Weight 1, ttl 2 s.
// Holders killed with SIGKILL: each life of the loop runs in a child process (one predis
// connection) whose lines come back through a pipe; p1's and p2's children are killed once
// in the middle of a hold (the member's expiry passes at its score, logged by the parent
// then: the next script any process calls drops it), and a new child goes on with the
// next rounds over a new connection.
//
//   php symfony_semaphore_worker.php PORT PROC [ROUNDS]
//   php symfony_semaphore_worker.php PORT PROC ROUNDS --life FROM KILL_ROUND   (a child)
// Needs php-cli, php-symfony-semaphore, php-predis (Debian).

require_once 'Symfony/Component/Semaphore/autoload.php';
require_once 'Predis/autoload.php';
require_once __DIR__ . '/truth_log.php';

use Symfony\Component\Semaphore\Exception\SemaphoreAcquiringException;
use Symfony\Component\Semaphore\Exception\SemaphoreExpiredException;
use Symfony\Component\Semaphore\Key;
use Symfony\Component\Semaphore\SemaphoreFactory;
use Symfony\Component\Semaphore\Store\RedisStore;

$port = (int) $argv[1];
$proc = $argv[2];
$rounds = (int) ($argv[3] ?? 8);

const TTL_S = 2;
// orders: 1 permit, polled every 100 ms for up to 1.5 s; pool: 2 permits, every 150 ms
// for up to 0.8 s, so its waiters give up more often.
const POLICY = ['orders' => ['limit' => 1, 'every_ms' => 100, 'patience_ms' => 1500],
                'pool' => ['limit' => 2, 'every_ms' => 150, 'patience_ms' => 800]];

// The store's calls, logged as the Semaphore makes them (their arguments and answers);
// the token is the store's own, kept in the Key's state.
class LoggedRedisStore extends RedisStore
{
    public $held = null;  // [lock, token, expiry (s)] of the hold, while held

    private static function lock(Key $key): string
    {
        return sprintf('{%s}', $key);
    }

    private static function token(Key $key): string
    {
        return $key->getState(RedisStore::class);
    }

    public function save(Key $key, float $ttlInSecond)
    {
        $sent = now_us();
        $now = time();  // what the store sends (read again inside it, within the same second)
        try {
            parent::save($key, $ttlInSecond);
        } catch (SemaphoreAcquiringException $e) {
            log_event(['event' => 'attempt', 'lock' => self::lock($key), 'owner' => self::token($key), 'reply' => null, 'sent_us' => $sent]);
            throw $e;
        }
        log_event(['event' => 'attempt', 'lock' => self::lock($key), 'owner' => self::token($key), 'reply' => 'OK', 'sent_us' => $sent]);
        log_event(['event' => 'acquired', 'lock' => self::lock($key), 'owner' => self::token($key)]);
        $this->held = [self::lock($key), self::token($key), $now + $ttlInSecond];
    }

    public function putOffExpiration(Key $key, float $ttlInSecond)
    {
        $sent = now_us();
        $now = time();
        try {
            parent::putOffExpiration($key, $ttlInSecond);
        } catch (SemaphoreExpiredException $e) {
            log_event(['event' => 'extend_refused', 'lock' => self::lock($key), 'owner' => self::token($key), 'reply' => 1, 'sent_us' => $sent]);
            $this->held = null;
            throw $e;
        }
        log_event(['event' => 'extended', 'lock' => self::lock($key), 'owner' => self::token($key), 'reply' => 1, 'sent_us' => $sent]);
        $this->held[2] = $now + $ttlInSecond;
    }

    public function delete(Key $key)
    {
        $sent = now_us();
        parent::delete($key);
        log_event(['event' => 'released', 'lock' => self::lock($key), 'owner' => self::token($key), 'sent_us' => $sent]);
        $this->held = null;
    }
}

if (($argv[4] ?? '') !== '--life') {
    // The parent: runs the rounds in children, killing p1's and p2's once mid-hold.
    $kill = ['p1' => intdiv($rounds, 3), 'p2' => intdiv(2 * $rounds, 3) + 1][$proc] ?? -1;
    run_rounds_in_children((string) $port, $rounds, $kill, function (array $o): void {
        // Mid-hold, nothing released: the member lapses at its expiry.
        [$lock, $owner, $expiry] = $o['held'];
        log_event(['event' => 'expired', 'lock' => $lock, 'owner' => $owner, 't_us' => (int) ($expiry * 1000000), 'killed' => true]);
    });
    exit(0);
}

// A child: rounds FROM.. of the loop, over its own connection.
$from = (int) $argv[5];
$killRound = (int) $argv[6];
$client = new Predis\Client(['host' => '127.0.0.1', 'port' => $port]);
$client->connect();
$store = new LoggedRedisStore($client);
$factory = new SemaphoreFactory($store);
for ($i = $from; $i < $rounds; ++$i) {
    $name = $i % 2 === 0 ? 'orders' : 'pool';
    $policy = POLICY[$name];
    $semaphore = $factory->createSemaphore('sem:' . $name, $policy['limit'], 1, TTL_S, false);
    // One round in six is a single try; the rest poll until their patience runs out.
    $once = $i % 6 === 5;
    $deadline = now_us() + $policy['patience_ms'] * 1000;
    $ok = $semaphore->acquire();
    while (!$ok && !$once && now_us() + $policy['every_ms'] * 1000 <= $deadline) {
        usleep($policy['every_ms'] * 1000);
        $ok = $semaphore->acquire();
    }
    if (!$ok) {
        log_event(['event' => 'gave_up', 'lock' => '{sem:' . $name . '}', 'owner' => (new ReflectionProperty($semaphore, 'key'))->getValue($semaphore)->getState(RedisStore::class)] + ($once ? ['single_try' => true] : []));
        usleep(random_int(0, 60000));
        continue;
    }
    if ($i === $killRound) {
        fwrite(STDOUT, json_encode(['event' => 'kill_me', 'round' => $i, 'held' => $store->held]) . "\n");
        fflush(STDOUT);
        sleep(30);
    }
    if ($i % 4 === 2) {
        // A longer hold (0.9-1.3 s), refreshed every 300-400 ms so its member never lapses.
        $until = now_us() + random_int(900000, 1300000);
        while (now_us() < $until) {
            usleep(min(random_int(300000, 400000), max(0, $until - now_us())));
            if (now_us() < $until) {
                $semaphore->refresh(TTL_S);
            }
        }
    } else {
        usleep(random_int(30000, 500000));
    }
    $semaphore->release();
    usleep(random_int(0, 60000));
}
$client->disconnect();
