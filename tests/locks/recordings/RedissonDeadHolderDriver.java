// Real Redisson (3.27.2) in two JVMs: "holder" takes lock "dl" with a 10 s lease and is SIGKILLed
// (by the recording script, 5 s after the waiter starts) while "waiter"'s threads wait: C with
// tryLock(20 s), keeping the channel subscribed, and B with tryLock(2 s) in a loop until it
// acquires. Logs each outcome with when it began (epoch µs). Recorded by
// record_redisson_trylock.sh; checked by test_give_ups.cpp (the dead holder: one
// tryLock's give-up joined with the next, and a false woken_by_timeout).
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonDeadHolderDriver {
  static synchronized void log(String s) { System.out.println("{\"t_us\":" + (System.currentTimeMillis() * 1000) + "," + s + "}"); System.out.flush(); }
  public static void main(String[] a) throws Exception {
    Config c = new Config();
    c.useSingleServer().setAddress("redis://127.0.0.1:" + a[0]);
    RedissonClient r = Redisson.create(c);
    RLock lock = r.getLock("dl");
    if (a[1].equals("holder")) {
      lock.lock(10, TimeUnit.SECONDS);
      log("\"event\":\"acquired\",\"who\":\"H\"");
      Thread.sleep(60000);
      return;
    }
    Thread cw = new Thread(() -> { try { long b = System.currentTimeMillis(); boolean got = lock.tryLock(20, TimeUnit.SECONDS); log("\"event\":\"" + (got ? "acquired" : "gave_up") + "\",\"who\":\"C\",\"began_us\":" + b * 1000); if (got) lock.unlock(); } catch (Exception e) {} });
    cw.start();
    Thread.sleep(200);
    Thread bw = new Thread(() -> { try { for (int i = 0; i < 10; i++) { long b = System.currentTimeMillis(); boolean got = lock.tryLock(2000, TimeUnit.MILLISECONDS); log("\"event\":\"" + (got ? "acquired" : "gave_up") + "\",\"who\":\"B\",\"began_us\":" + b * 1000); if (got) { lock.unlock(); break; } } } catch (Exception e) {} });
    bw.start();
    cw.join(); bw.join();
    r.shutdown();
  }
}
