// Real Redisson on a Redis Cluster beside `lockscope` processes, one JVM for a whole run of
// the cluster interop test (tests/lock/redisson_interop_cluster.py): JVM start-up costs
// seconds, so this one process plays Redisson's side of every phase the test sends it.
// Redisson connects with useClusterServers() and its default subscription mode: from 3.22
// it finds sharded pub/sub on Redis 7 (3.22.0-3.27.2 by a test SPUBLISH, from 3.28.0 by
// PUBSUB SHARDNUMSUB; ShardedSubscriptionMode.AUTO from 3.29.0) and then SSUBSCRIBEs and
// SPUBLISHes; 3.16 SUBSCRIBEs and PUBLISHes.
//
// Prints "ready", then reads one command a line from stdin and answers "done" (or
// "awaiting" for await) when it finished:
//   log PATH               the log the following commands append to
//   hold TYPE NAME WORKERS ROUNDS HOLD_MS   TYPE lock|fair|write|rw|fenced|semaphore|expirable:
//       WORKERS threads take NAME ROUNDS times each, hold HOLD_MS, release; one log line
//       per hold `java-<w> <start ns> <end ns> <wait start ns> [<fence token>]` (rw: even
//       workers write, odd ones read, labels java-w-N / java-r-N; semaphore and
//       expirable: one permit, the permit-expirable one with a 10 s lease)
//   await NAME THREADS     THREADS threads await latch NAME; each logs `java-latch-<i> <woke ns>`
//                          (answered "awaiting" at once: the test watches the subscriptions)
//   joined                 waits for the awaiting threads to end
//   countdown NAME         logs `java-countdown <ns>` and counts latch NAME down
//   quit
// Times are System.nanoTime (CLOCK_MONOTONIC on Linux, the clock lockscope's side logs with).
//
//   java -cp out:$CP RedissonClusterContender HOST:PORT[,HOST:PORT...] LOG (the first log)
//   java -cp out:$CP RedissonClusterContender single:HOST:PORT LOG   (one server, useSingleServer())
import java.io.BufferedReader;
import java.io.FileWriter;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;

public class RedissonClusterContender {
    static PrintWriter log;

    static synchronized void line(String text) {
        log.println(text);
        log.flush();
    }

    static synchronized void logTo(String path) throws java.io.IOException {
        if (log != null) log.close();
        log = new PrintWriter(new FileWriter(path, true));
    }

    interface Hold { String take() throws Exception; void give(String taken) throws Exception; }

    static Hold holdOf(RedissonClient redisson, String type, String name, int worker) throws Exception {
        switch (type) {
            case "fair": return lockHold(redisson.getFairLock(name));
            case "write": return lockHold(redisson.getReadWriteLock(name).writeLock());
            case "rw": return lockHold(worker % 2 == 0 ? redisson.getReadWriteLock(name).writeLock()
                                                       : redisson.getReadWriteLock(name).readLock());
            case "fenced": {
                // Looked up by reflection: the source compiles against releases before 3.19.
                Object fenced = RedissonClient.class.getMethod("getFencedLock", String.class).invoke(redisson, name);
                java.lang.reflect.Method lockAndGetToken = fenced.getClass().getMethod("lockAndGetToken");
                return new Hold() {
                    public String take() throws Exception { return " " + lockAndGetToken.invoke(fenced); }
                    public void give(String taken) { ((RLock) fenced).unlock(); }
                };
            }
            case "semaphore": {
                RSemaphore s = redisson.getSemaphore(name);
                return new Hold() {
                    public String take() throws Exception { s.acquire(); return ""; }
                    public void give(String taken) { s.release(); }
                };
            }
            case "expirable": {
                RPermitExpirableSemaphore s = redisson.getPermitExpirableSemaphore(name);
                return new Hold() {
                    public String take() throws Exception { return s.acquire(10, TimeUnit.SECONDS); }
                    public void give(String taken) { s.release(taken); }
                };
            }
            default: return lockHold(redisson.getLock(name));
        }
    }

    static Hold lockHold(RLock lock) {
        return new Hold() {
            public String take() { lock.lock(); return ""; }
            public void give(String taken) { lock.unlock(); }
        };
    }

    static void hold(RedissonClient redisson, String type, String name, int workers, int rounds, long holdMs)
            throws Exception {
        List<Thread> threads = new ArrayList<>();
        for (int w = 0; w < workers; ++w) {
            final Hold h = holdOf(redisson, type, name, w);
            final String label = type.equals("rw") ? "java-" + (w % 2 == 0 ? "w-" : "r-") + w : "java-" + w;
            final boolean token = type.equals("fenced");
            Thread t = new Thread(() -> {
                try {
                    for (int r = 0; r < rounds; ++r) {
                        long waitStart = System.nanoTime();
                        String taken = h.take();
                        long start = System.nanoTime();
                        Thread.sleep(holdMs);
                        long end = System.nanoTime();
                        h.give(taken);
                        line(label + " " + start + " " + end + " " + waitStart + (token ? taken : ""));
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
    }

    public static void main(String[] args) throws Exception {
        logTo(args[1]);
        Config config = new Config();
        if (args[0].startsWith("single:")) {
            config.useSingleServer().setAddress("redis://" + args[0].substring("single:".length()));
        } else {
            ClusterServersConfig cluster = config.useClusterServers();
            for (String node : args[0].split(",")) cluster.addNodeAddress("redis://" + node);
            cluster.setReadMode(ReadMode.MASTER);  // the test's cluster has no replicas
        }
        RedissonClient redisson = Redisson.create(config);
        // Load the scripts and warm the JIT on objects nobody else uses.
        for (String type : new String[] {"lock", "fair", "rw", "semaphore"}) {
            if (type.equals("semaphore")) redisson.getSemaphore("warm-up-s").trySetPermits(1);
            hold(redisson, type, "warm-up-" + type.charAt(0), 1, 1, 0);
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        List<Thread> awaiting = new ArrayList<>();
        for (String command; (command = in.readLine()) != null; ) {
            String[] a = command.trim().split(" ");
            switch (a[0]) {
                case "log":
                    logTo(a[1]);
                    break;
                case "hold":
                    hold(redisson, a[1], a[2], Integer.parseInt(a[3]), Integer.parseInt(a[4]), Long.parseLong(a[5]));
                    break;
                case "await": {
                    RCountDownLatch latch = redisson.getCountDownLatch(a[1]);
                    for (int i = 0; i < Integer.parseInt(a[2]); ++i) {
                        final String label = "java-latch-" + i;
                        Thread t = new Thread(() -> {
                            try {
                                if (!latch.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("not woken in 60 s");
                                line(label + " " + System.nanoTime());
                            } catch (Exception e) {
                                e.printStackTrace();
                                System.exit(3);
                            }
                        });
                        t.start();
                        awaiting.add(t);
                    }
                    System.out.println("awaiting");
                    System.out.flush();
                    continue;
                }
                case "joined":
                    for (Thread t : awaiting) t.join();
                    awaiting.clear();
                    break;
                case "countdown":
                    line("java-countdown " + System.nanoTime());
                    redisson.getCountDownLatch(a[1]).countDown();
                    break;
                case "quit":
                    redisson.shutdown();
                    System.out.println("done");
                    System.out.flush();
                    return;
                default:
                    throw new IllegalArgumentException("unknown command: " + command);
            }
            System.out.println("done");
            System.out.flush();
        }
    }
}
