// Real Redisson read/write locks, MultiLocks and RedLocks, logging what each thread did:
// one JSON object a line, {"ms", "jvm", "type", "lock", "thread", "owners", "did"} with
// did = acquired | busy | released, and owners the owner id on each server it acted on
// (Redisson's MultiLock and RedLock use one client per server: one owner id a server,
// only the thread id shared). The oracle of tests/locks/test_groups_recorded.cpp.
//
//   java -cp out:$CP RedissonGroupsDriver rw    <port>              <log> <jvm label>
//   java -cp out:$CP RedissonGroupsDriver multi <port1,port2,port3> <log> <jvm label> <threads> <rounds>
//   java -cp out:$CP RedissonGroupsDriver red   <port1,port2,port3> <log> <jvm label> <threads> <rounds>
//
// rw: two readers hold "rw" together and leave 1 s apart (the first leaves while the other
// still reads: nothing is published); a writer waits for both with tryLock, its retries
// timed by the TTL it is given (the watchdog, 1.5 s) in between.
// multi / red: <threads> threads each take the group "grp" (the key "grp" on every server)
// <rounds> times with tryLock(3 s wait, lease by watchdog), hold 30-80 ms, and release.
import java.io.FileWriter;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.RedissonMultiLock;
import org.redisson.RedissonRedLock;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonGroupsDriver {
    static PrintWriter log;
    static String jvm;
    static List<RedissonClient> clients = new ArrayList<>();

    static synchronized void did(String type, String lock, String suffix, String what) {
        long thread = Thread.currentThread().getId();
        StringBuilder owners = new StringBuilder();
        for (RedissonClient c : clients) {
            if (owners.length() > 0) owners.append(", ");
            owners.append('"').append(c.getId()).append(':').append(thread).append(suffix).append('"');
        }
        log.println("{\"ms\": " + System.currentTimeMillis() + ", \"jvm\": \"" + jvm + "\", \"type\": \"" + type
                + "\", \"lock\": \"" + lock + "\", \"thread\": " + thread + ", \"owners\": [" + owners + "], \"did\": \""
                + what + "\"}");
        log.flush();
    }

    static void sleep(long ms) {
        try { Thread.sleep(ms); } catch (InterruptedException e) { throw new RuntimeException(e); }
    }

    interface Body { void run() throws Exception; }

    static Thread start(Body b) {
        Thread t = new Thread(() -> { try { b.run(); } catch (Exception e) { throw new RuntimeException(e); } });
        t.start();
        return t;
    }

    static RedissonClient client(String port) throws Exception {
        Config config = new Config();
        // -Dlockscope.protocol=RESP3 (record_groups.sh's PROTOCOL): RedissonProtocol.java.
        String protocol = System.getProperty("lockscope.protocol");
        if (protocol != null) RedissonProtocol.set(config, protocol);
        config.setLockWatchdogTimeout(1500);  // renewals every 500 ms, TTLs of 1.5 s
        config.useSingleServer().setAddress("redis://127.0.0.1:" + port);
        RedissonClient c = Redisson.create(config);
        clients.add(c);
        return c;
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String[] ports = args[1].split(",");
        log = new PrintWriter(new FileWriter(args[2], true));
        jvm = args[3];
        for (String p : ports) client(p);
        if (mode.equals("rw")) {
            RReadWriteLock rw = clients.get(0).getReadWriteLock("rw");
            CountDownLatch both = new CountDownLatch(2);
            List<Thread> readers = new ArrayList<>();
            for (int i = 0; i < 2; ++i) {
                final long hold = 1000 + 2500L * i;  // the first leaves at 1 s, the second at 3.5 s
                readers.add(start(() -> {
                    rw.readLock().lock();
                    did("read", "rw", "", "acquired");
                    both.countDown();
                    sleep(hold);
                    rw.readLock().unlock();
                    did("read", "rw", "", "released");
                }));
            }
            both.await();
            Thread writer = start(() -> {
                if (rw.writeLock().tryLock(10, TimeUnit.SECONDS)) {
                    did("write", "rw", ":write", "acquired");
                    sleep(200);
                    rw.writeLock().unlock();
                    did("write", "rw", ":write", "released");
                } else {
                    did("write", "rw", ":write", "busy");
                }
            });
            for (Thread t : readers) t.join();
            writer.join();
        } else {
            int threads = Integer.parseInt(args[4]);
            int rounds = Integer.parseInt(args[5]);
            // Load the scripts and warm up on a key nobody else uses.
            for (RedissonClient c : clients) { RLock w = c.getLock("warm-up"); w.lock(); w.unlock(); }
            List<Thread> ts = new ArrayList<>();
            for (int k = 0; k < threads; ++k) {
                final int worker = k;
                ts.add(start(() -> {
                    for (int r = 0; r < rounds; ++r) {
                        RLock[] locks = new RLock[clients.size()];
                        for (int i = 0; i < locks.length; ++i) locks[i] = clients.get(i).getLock("grp");
                        RLock group = mode.equals("red") ? new RedissonRedLock(locks) : new RedissonMultiLock(locks);
                        if (group.tryLock(3, TimeUnit.SECONDS)) {
                            did(mode, "grp", "", "acquired");
                            sleep(30 + 10 * ((worker + r) % 6));
                            group.unlock();
                            did(mode, "grp", "", "released");
                        } else {
                            did(mode, "grp", "", "busy");
                        }
                        sleep(5);
                    }
                }));
            }
            for (Thread t : ts) t.join();
        }
        for (RedissonClient c : clients) c.shutdown();
    }
}
