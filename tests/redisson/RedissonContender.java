// Real Redisson contending with `lockscope lock` processes on one lock (the interop test
// tests/lock/redisson_interop.py). Starts one Redisson client, prints "ready", waits for a
// line on stdin, then runs WORKERS threads that each take the lock ROUNDS times, hold it
// HOLD_MS and release it, logging `java-<worker> <start ns> <end ns> <wait start ns>
// [<fence token>]` per hold (System.nanoTime: CLOCK_MONOTONIC on Linux, the clock lockscope's side logs with).
// The start is taken after lock() returned and the end before unlock(): inside the hold.
//
//   java -cp out:$CP RedissonContender PORT lock|fair|write|rw|fenced WORKERS ROUNDS HOLD_MS LOG
// (fenced: Redisson 3.19.0 and later, looked up by reflection so that the source compiles
// against older jars)
import java.io.BufferedReader;
import java.io.FileWriter;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonContender {
    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        String type = args[1];
        int workers = Integer.parseInt(args[2]);
        int rounds = Integer.parseInt(args[3]);
        long holdMs = Long.parseLong(args[4]);
        PrintWriter log = new PrintWriter(new FileWriter(args[5], true));
        Config config = new Config();
        config.useSingleServer().setAddress("redis://127.0.0.1:" + port);
        RedissonClient redisson = Redisson.create(config);
        RLock lock;
        switch (type) {
            case "fair": lock = redisson.getFairLock("interop"); break;
            case "write": lock = redisson.getReadWriteLock("interop").writeLock(); break;
            case "fenced":
                lock = (RLock) RedissonClient.class.getMethod("getFencedLock", String.class).invoke(redisson, "interop");
                break;
            default: lock = redisson.getLock("interop");
        }
        // Load the scripts and warm the JIT on a lock of the same type nobody else uses,
        // with a waiter woken by pub/sub: a cold first wake-up of Redisson's own fair
        // waiter took 117 ms on a busy machine.
        RLock warm;
        switch (type) {
            case "fair": warm = redisson.getFairLock("interop-warm-up"); break;
            case "write": case "rw": warm = redisson.getReadWriteLock("interop-warm-up").writeLock(); break;
            default: warm = redisson.getLock("interop-warm-up");
        }
        warm.lock();
        Thread warmWaiter = new Thread(() -> { warm.lock(); warm.unlock(); });
        warmWaiter.start();
        Thread.sleep(50);
        warm.unlock();
        warmWaiter.join();
        System.out.println("ready");
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        List<Thread> threads = new ArrayList<>();
        final java.lang.reflect.Method lockAndGetToken =
                type.equals("fenced") ? lock.getClass().getMethod("lockAndGetToken") : null;
        for (int w = 0; w < workers; ++w) {
            // rw: even workers write, odd ones read (labels java-w-N / java-r-N).
            final RLock mine = !type.equals("rw") ? lock
                    : w % 2 == 0 ? redisson.getReadWriteLock("interop").writeLock()
                    : redisson.getReadWriteLock("interop").readLock();
            final String label = type.equals("rw") ? "java-" + (w % 2 == 0 ? "w-" : "r-") + w : "java-" + w;
            Thread t = new Thread(() -> {
                try {
                    for (int r = 0; r < rounds; ++r) {
                        long waitStart = System.nanoTime();
                        String token = "";
                        if (lockAndGetToken != null) {
                            token = " " + lockAndGetToken.invoke(lock);
                        } else {
                            mine.lock();
                        }
                        long start = System.nanoTime();
                        Thread.sleep(holdMs);
                        long end = System.nanoTime();
                        mine.unlock();
                        synchronized (log) {
                            log.println(label + " " + start + " " + end + " " + waitStart + token);
                            log.flush();
                        }
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(3);
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) t.join();
        redisson.shutdown();
        System.out.println("done");
    }
}
