// Redisson alone, no lockscope: does a waiter miss a release that lands between its failed
// try and its parking on the lock entry's latch? (tests/lock/redisson_read_unlock_race.py)
//
// Each trial: client A holds a fresh lock; client B starts lock() at a random moment up to
// SPREAD_US before A releases, so that B's tries (before and after its subscription) now and
// then get their "busy" reply just before the release's message. A wait that outlives the
// release by more than half the lease slept out the holder's TTL: the wake-up was lost.
//
//   java -cp out:$CP RedissonWakeUpRace HOST:PORT lock|write|fair TRIALS LEASE_MS SPREAD_US STOP_AFTER
// prints `TYPE TRIALS_RUN LOST WORST_MS`, after at most TRIALS trials or STOP_AFTER losses.
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonWakeUpRace {
    static RLock lockOf(RedissonClient client, String type, String name) {
        switch (type) {
            case "write": return client.getReadWriteLock(name).writeLock();
            case "fair": return client.getFairLock(name);
            default: return client.getLock(name);
        }
    }

    // Sleeping would round the start to the scheduler's tick, far coarser than the window.
    static void spinUntil(long deadline) {
        while (System.nanoTime() < deadline) Thread.onSpinWait();
    }

    public static void main(String[] args) throws Exception {
        String address = args[0], type = args[1];
        int trials = Integer.parseInt(args[2]);
        long leaseMs = Long.parseLong(args[3]);
        int spreadUs = Integer.parseInt(args[4]);
        int stopAfter = Integer.parseInt(args[5]);
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + address);
        RedissonClient holderClient = Redisson.create(config), waiterClient = Redisson.create(config);
        Random random = new Random(1);
        int run = 0, lost = 0;
        long worstMs = 0;
        for (; run < trials && lost < stopAfter; ++run) {
            String name = "race-" + type + "-" + run;
            RLock holder = lockOf(holderClient, type, name), waiter = lockOf(waiterClient, type, name);
            holder.lock(leaseMs, TimeUnit.MILLISECONDS);
            long release = System.nanoTime() + 4_000_000;
            long start = release - random.nextInt(spreadUs) * 1000L;
            long[] acquired = new long[1];
            Thread waiting = new Thread(() -> {
                spinUntil(start);
                waiter.lock(leaseMs, TimeUnit.MILLISECONDS);
                acquired[0] = System.nanoTime();
                waiter.unlock();
            });
            waiting.start();
            spinUntil(release);
            long released = System.nanoTime();
            holder.unlock();
            waiting.join();
            long ms = (acquired[0] - released) / 1_000_000;
            worstMs = Math.max(worstMs, ms);
            if (ms > leaseMs / 2) lost++;
        }
        System.out.println(type + " " + run + " " + lost + " " + worstMs);
        holderClient.shutdown();
        waiterClient.shutdown();
        System.exit(0);
    }
}
