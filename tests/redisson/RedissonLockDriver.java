// Drives every lock type of a real Redisson release against a redis-server and logs what
// Redisson itself reports: one JSON object a line, {"ms", "type", "lock", "owner", "did"}
// with did = acquired | busy | released | force_released (and "token" for the fenced lock).
// The log is the oracle tests/locks/test_redisson_releases.cpp compares lockscope with.
// The lock types a release lacks (fenced before 3.19, FasterMultiLock before 3.38, the
// non-reentrant ones before 4.4) are looked up by reflection and skipped, so the one
// source compiles against every release's jar. A third argument names the protocol
// Redisson speaks (RedissonProtocol.java: RESP2, its default, or RESP3).
//
//   javac -cp $CP -d out RedissonLockDriver.java RedissonProtocol.java
//   java -cp out:$CP RedissonLockDriver <port> <log file> [RESP2|RESP3]
import java.io.FileWriter;
import java.io.PrintWriter;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonLockDriver {
    static PrintWriter log;
    static RedissonClient redisson;

    static synchronized void did(String type, String lock, String what, String extra) {
        String owner = redisson.getId() + ":" + Thread.currentThread().getId();
        log.println("{\"ms\": " + System.currentTimeMillis() + ", \"type\": \"" + type + "\", \"lock\": \"" + lock
                + "\", \"owner\": \"" + owner + "\", \"did\": \"" + what + "\"" + extra + "}");
        log.flush();
    }

    static void sleep(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { throw new RuntimeException(e); }
    }

    interface Body { void run() throws Exception; }

    // redisson.<method>(args), or null when this release has no such method.
    static Object optional(String method, Object... args) throws Exception {
        for (java.lang.reflect.Method m : RedissonClient.class.getMethods()) {
            if (!m.getName().equals(method) || m.getParameterCount() != args.length) continue;
            Class<?>[] types = m.getParameterTypes();
            boolean fits = true;
            for (int i = 0; i < args.length; ++i) fits &= types[i].isInstance(args[i]);
            if (fits) return m.invoke(redisson, args);
        }
        return null;
    }

    static Thread start(Body b) {
        Thread t = new Thread(() -> { try { b.run(); } catch (Exception e) { throw new RuntimeException(e); } });
        t.start();
        return t;
    }

    // A holder keeps the lock past a few watchdog renewals while a waiter waits for it.
    static void contended(String type, String name, RLock holderLock, RLock waiterLock) throws Exception {
        CountDownLatch held = new CountDownLatch(1);
        Thread holder = start(() -> {
            holderLock.lock();
            did(type, name, "acquired", "");
            held.countDown();
            sleep(1500);
            holderLock.unlock();
            did(type, name, "released", "");
        });
        held.await();
        Thread waiter = start(() -> {
            if (waiterLock.tryLock(5, TimeUnit.SECONDS)) {
                did(type, name, "acquired", "");
                sleep(200);
                waiterLock.unlock();
                did(type, name, "released", "");
            } else {
                did(type, name, "busy", "");
            }
        });
        holder.join();
        waiter.join();
    }

    static void forced(String type, String name, RLock lock) throws Exception {
        Thread holder = start(() -> { lock.lock(10, TimeUnit.SECONDS); did(type, name, "acquired", ""); });
        holder.join();
        if (lock.forceUnlock()) did(type, name, "force_released", "");
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        log = new PrintWriter(new FileWriter(args[1]));
        Config config = new Config();
        config.setLockWatchdogTimeout(1500);  // renewals every 500 ms
        config.useSingleServer().setAddress("redis://127.0.0.1:" + port);
        if (args.length > 2) RedissonProtocol.set(config, args[2]);
        redisson = Redisson.create(config);

        contended("lock", "rlock", redisson.getLock("rlock"), redisson.getLock("rlock"));
        forced("lock", "rlock", redisson.getLock("rlock"));

        contended("fair", "fair", redisson.getFairLock("fair"), redisson.getFairLock("fair"));
        {
            // tryLock() without arguments while held (the reply 1 means busy), and a timed
            // tryLock that gives up (its clean-up leaves the queue).
            RLock fair = redisson.getFairLock("fair");
            CountDownLatch held = new CountDownLatch(1), done = new CountDownLatch(1);
            Thread holder = start(() -> {
                fair.lock();
                did("fair", "fair", "acquired", "");
                held.countDown();
                done.await();
                fair.unlock();
                did("fair", "fair", "released", "");
            });
            held.await();
            Thread other = start(() -> {
                did("fair", "fair", fair.tryLock() ? "acquired" : "busy", "");
                did("fair", "fair", fair.tryLock(300, TimeUnit.MILLISECONDS) ? "acquired" : "busy", "");
            });
            other.join();
            done.countDown();
            holder.join();
        }
        forced("fair", "fair", redisson.getFairLock("fair"));

        {
            // Two readers hold together past a renewal; a writer waits for both.
            RReadWriteLock rw = redisson.getReadWriteLock("rw");
            CountDownLatch readers = new CountDownLatch(2);
            Body reader = () -> {
                rw.readLock().lock();
                did("read", "rw", "acquired", "");
                readers.countDown();
                sleep(1200);
                rw.readLock().unlock();
                did("read", "rw", "released", "");
            };
            Thread r1 = start(reader), r2 = start(reader);
            readers.await();
            Thread writer = start(() -> {
                if (rw.writeLock().tryLock(5, TimeUnit.SECONDS)) {
                    did("write", "rw", "acquired", "");
                    sleep(200);
                    rw.writeLock().unlock();
                    did("write", "rw", "released", "");
                } else {
                    did("write", "rw", "busy", "");
                }
            });
            r1.join();
            r2.join();
            writer.join();
            forced("read", "rw", rw.readLock());
            forced("write", "rw", rw.writeLock());
        }

        contended("spin", "spin", redisson.getSpinLock("spin"), redisson.getSpinLock("spin"));
        forced("spin", "spin", redisson.getSpinLock("spin"));

        Object fenced = optional("getFencedLock", "fenced");
        if (fenced != null) {
            RLock fencedLock = (RLock) fenced;
            java.lang.reflect.Method lockAndGetToken = fenced.getClass().getMethod("lockAndGetToken");
            Thread t = start(() -> {
                Long token = (Long) lockAndGetToken.invoke(fenced);
                did("fenced", "fenced", "acquired", ", \"token\": " + token);
                fencedLock.unlock();
                did("fenced", "fenced", "released", "");
                fencedLock.lock();
                did("fenced", "fenced", "acquired", "");
                fencedLock.unlock();
                did("fenced", "fenced", "released", "");
            });
            t.join();
        }

        if (optional("getMultiLock", "group", Arrays.asList("a", "b")) != null) {
            contended("faster_multi", "group", (RLock) optional("getMultiLock", "group", Arrays.asList("a", "b")),
                      (RLock) optional("getMultiLock", "group", Arrays.asList("b", "c")));
        }
        if (optional("getNonReentrantLock", "nonreentrant") != null) {
            contended("non_reentrant", "nonreentrant", (RLock) optional("getNonReentrantLock", "nonreentrant"),
                      (RLock) optional("getNonReentrantLock", "nonreentrant"));
            contended("non_reentrant_fair", "nonreentrantfair",
                      (RLock) optional("getNonReentrantFairLock", "nonreentrantfair"),
                      (RLock) optional("getNonReentrantFairLock", "nonreentrantfair"));
        }

        redisson.shutdown();
        log.close();
    }
}
