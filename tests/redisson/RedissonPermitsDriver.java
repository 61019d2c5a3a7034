// Real Redisson's semaphores and latch under contention, each thread logging what it did
// (the oracle of tests/locks/test_permits.cpp). Three scenarios, one after the other:
//  - RSemaphore "sem", 2 permits: 4 threads x 8 rounds; two poll with tryAcquire() every
//    20 ms (each refusal logged), two block in acquire() (woken by the channel
//    redisson_sc:{sem}); each holds 40-100 ms and releases.
//  - RPermitExpirableSemaphore "xsem", 2 permits: a "leaker" takes a permit with a
//    400 ms lease and never gives it back (logged "acquired" with its id, then "lost"
//    when its tryRelease is refused); 3 threads x 6 rounds poll tryAcquire(0, 2 s)
//    every 25 ms, hold 40-90 ms and release by id.
//  - RCountDownLatch "latch", count 3: two threads await(), the main thread counts down
//    three times 100 ms apart; the waiters log "woke".
// One JSON line per act: {"ms": <wall clock after the call returned>, "type":
// "semaphore"|"expirable"|"latch", "lock", "owner" (thread name, or the permit id in
// hex), "did": set|acquired|refused|released|lost|counted_down|woke}.
//
// A third argument names the protocol Redisson speaks (RedissonProtocol.java: RESP2, its
// default, or RESP3).
//
//   javac -cp $CP -d out RedissonPermitsDriver.java RedissonProtocol.java
//   java -cp out:$CP RedissonPermitsDriver <port> <log> [RESP2|RESP3]
import java.io.FileWriter;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonPermitsDriver {
    static PrintWriter log;

    static synchronized void mark(String type, String lock, String owner, String did) {
        log.println("{\"ms\": " + System.currentTimeMillis() + ", \"type\": \"" + type + "\", \"lock\": \"" + lock
                + "\", \"owner\": \"" + owner + "\", \"did\": \"" + did + "\"}");
        log.flush();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new RuntimeException(e);
        }
    }

    static void joinAll(List<Thread> threads) throws InterruptedException {
        for (Thread t : threads) t.join();
        threads.clear();
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        log = new PrintWriter(new FileWriter(args[1], false));
        Config config = new Config();
        config.useSingleServer().setAddress("redis://127.0.0.1:" + port);
        if (args.length > 2) RedissonProtocol.set(config, args[2]);
        RedissonClient redisson = Redisson.create(config);
        List<Thread> threads = new ArrayList<>();

        RSemaphore sem = redisson.getSemaphore("sem");
        if (sem.trySetPermits(2)) mark("semaphore", "sem", "main", "set");
        for (int t = 0; t < 4; ++t) {
            final boolean polls = t < 2;
            final String name = (polls ? "poller-" : "blocker-") + t;
            final Random random = new Random(t);
            Thread w = new Thread(() -> {
                for (int i = 0; i < 8; ++i) {
                    if (polls) {
                        while (!sem.tryAcquire()) {
                            mark("semaphore", "sem", name, "refused");
                            sleep(20);
                        }
                    } else {
                        try {
                            sem.acquire();
                        } catch (InterruptedException e) {
                            throw new RuntimeException(e);
                        }
                    }
                    mark("semaphore", "sem", name, "acquired");
                    sleep(40 + random.nextInt(60));
                    sem.release();
                    mark("semaphore", "sem", name, "released");
                    sleep(5);
                }
            }, name);
            w.start();
            threads.add(w);
        }
        joinAll(threads);
        sleep(200);

        RPermitExpirableSemaphore xsem = redisson.getPermitExpirableSemaphore("xsem");
        if (xsem.trySetPermits(2)) mark("expirable", "xsem", "main", "set");
        final String leaked = xsem.acquire(400, TimeUnit.MILLISECONDS);
        mark("expirable", "xsem", leaked, "acquired");
        for (int t = 0; t < 3; ++t) {
            final String name = "worker-" + t;
            final Random random = new Random(10 + t);
            Thread w = new Thread(() -> {
                for (int i = 0; i < 6; ++i) {
                    String id;
                    try {
                        while ((id = xsem.tryAcquire(0, 2000, TimeUnit.MILLISECONDS)) == null) {
                            mark("expirable", "xsem", name, "refused");
                            sleep(25);
                        }
                    } catch (InterruptedException e) {
                        throw new RuntimeException(e);
                    }
                    mark("expirable", "xsem", id, "acquired");
                    sleep(40 + random.nextInt(50));
                    xsem.release(id);
                    mark("expirable", "xsem", id, "released");
                    sleep(5);
                }
            }, name);
            w.start();
            threads.add(w);
        }
        joinAll(threads);
        if (!xsem.tryRelease(leaked)) mark("expirable", "xsem", leaked, "lost");
        sleep(200);

        RCountDownLatch latch = redisson.getCountDownLatch("latch");
        if (latch.trySetCount(3)) mark("latch", "latch", "main", "set");
        for (int t = 0; t < 2; ++t) {
            final String name = "waiter-" + t;
            Thread w = new Thread(() -> {
                try {
                    latch.await();
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
                mark("latch", "latch", name, "woke");
            }, name);
            w.start();
            threads.add(w);
        }
        sleep(300);
        for (int i = 0; i < 3; ++i) {
            latch.countDown();
            mark("latch", "latch", "main", "counted_down");
            sleep(100);
        }
        joinAll(threads);
        redisson.shutdown();
        log.close();
    }
}
