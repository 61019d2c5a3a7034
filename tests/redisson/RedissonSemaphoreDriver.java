// Real Redisson's RSemaphore and RCountDownLatch beside lockscope on the same objects
// (tests/lock/test_semaphore_cli.cpp). Waits on latch <go> (lockscope counts it down:
// a wake-up from lockscope to Redisson), logs "woke <ns>", then <threads> threads each
// acquire one permit of <semaphore> <rounds> times, log "+ <ns>" and "- <ns>" (wall
// clock, as `date +%s%N`) around a 50 ms hold, and release; at the end it counts latch
// <back> down (a wake-up from Redisson to lockscope) and prints "done". Between the two,
// the same threads do the same on the permit-expirable semaphore <semaphore>-x (a lease
// of 10 s per permit), logging "+x" and "-x".
//
//   java -cp out:$CP RedissonSemaphoreDriver <port> <semaphore> <permits> <threads> <rounds> <go> <back> <log>
import java.io.FileWriter;
import java.io.PrintWriter;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonSemaphoreDriver {
    static PrintWriter log;

    static synchronized void mark(String what) {
        Instant now = Instant.now();
        log.println(what + " " + (now.getEpochSecond() * 1_000_000_000L + now.getNano()));
        log.flush();
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String semaphore = args[1];
        int permits = Integer.parseInt(args[2]);
        int threads = Integer.parseInt(args[3]);
        int rounds = Integer.parseInt(args[4]);
        log = new PrintWriter(new FileWriter(args[7], true));
        Config config = new Config();
        config.useSingleServer().setAddress("redis://127.0.0.1:" + port);
        RedissonClient redisson = Redisson.create(config);
        RSemaphore sem = redisson.getSemaphore(semaphore);
        sem.trySetPermits(permits);
        RCountDownLatch go = redisson.getCountDownLatch(args[5]);
        System.out.println("ready");
        System.out.flush();
        if (!go.await(120, TimeUnit.SECONDS)) throw new IllegalStateException("never released by lockscope");
        mark("woke");
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; ++t) {
            Thread w = new Thread(() -> {
                try {
                    for (int i = 0; i < rounds; ++i) {
                        sem.acquire();
                        mark("+");
                        Thread.sleep(50);
                        mark("-");
                        sem.release();
                    }
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) w.join();
        // The permit-expirable semaphore <semaphore>-x: permits with ids and a lease of 10 s.
        RPermitExpirableSemaphore pes = redisson.getPermitExpirableSemaphore(semaphore + "-x");
        pes.trySetPermits(permits);
        workers.clear();
        for (int t = 0; t < threads; ++t) {
            Thread w = new Thread(() -> {
                try {
                    for (int i = 0; i < rounds; ++i) {
                        String id = pes.acquire(10, TimeUnit.SECONDS);
                        mark("+x");
                        Thread.sleep(50);
                        mark("-x");
                        pes.release(id);
                    }
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
            });
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) w.join();
        redisson.getCountDownLatch(args[6]).countDown();
        System.out.println("done");
        System.out.flush();
        redisson.shutdown();
    }
}
