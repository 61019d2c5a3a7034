// Real Redisson (3.27.2, /work/shared/redisson) in one JVM, one client: H holds lock "tl"
// 6 s; C waits with tryLock(9 s), so the client's subscription to the channel stays while
// B runs tryLock(1.5 s) three times in a row, each giving up with nothing on the wire (no
// UNSUBSCRIBE: C still listens). Logs each outcome with when it began (epoch µs, the
// capture's clock). Recorded by record_redisson_trylock.sh; checked by test_give_ups.cpp.
import java.util.concurrent.TimeUnit;
import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public class RedissonTryLockDriver {
  static synchronized void log(String s) { System.out.println("{\"t_us\":" + (System.currentTimeMillis() * 1000) + "," + s + "}"); System.out.flush(); }
  public static void main(String[] a) throws Exception {
    Config c = new Config();
    c.useSingleServer().setAddress("redis://127.0.0.1:" + a[0]);
    RedissonClient r = Redisson.create(c);
    RLock lock = r.getLock("tl");
    Thread h = new Thread(() -> { lock.lock(); log("\"event\":\"acquired\",\"who\":\"H\""); try { Thread.sleep(6000); } catch (Exception e) {} lock.unlock(); log("\"event\":\"released\",\"who\":\"H\""); });
    h.start();
    Thread.sleep(300);
    Thread cw = new Thread(() -> { try { long b = System.currentTimeMillis(); boolean got = lock.tryLock(9, TimeUnit.SECONDS); log("\"event\":\"" + (got ? "acquired" : "gave_up") + "\",\"who\":\"C\",\"began_us\":" + b * 1000); if (got) lock.unlock(); } catch (Exception e) {} });
    cw.start();
    Thread.sleep(300);
    Thread bw = new Thread(() -> { try { for (int i = 0; i < 3; i++) { long b = System.currentTimeMillis(); boolean got = lock.tryLock(1500, TimeUnit.MILLISECONDS); log("\"event\":\"" + (got ? "acquired" : "gave_up") + "\",\"who\":\"B\",\"began_us\":" + b * 1000 + ",\"thread\":" + Thread.currentThread().getId()); if (got) { lock.unlock(); break; } } } catch (Exception e) {} });
    bw.start();
    h.join(); cw.join(); bw.join();
    r.shutdown();
  }
}
