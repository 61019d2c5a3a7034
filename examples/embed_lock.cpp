// The README's embedding example; tests/examples runs it against a real redis-server.
#include <lockscope/lock/client.hpp>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace lk = lockscope::lock;

int main(int argc, char** argv) {
  auto config = lk::client_config::from_url(argc > 1 ? argv[1] : "redis://127.0.0.1:6379/0");
  config.on_lock_lost = [](const std::string& name) { std::fprintf(stderr, "lost %s\n", name.c_str()); };
  lk::client redis(config);
  redis.connect();                                  // throws lk::lock_error: refused, WRONGPASS, timeout
  lk::rlock lock = redis.get_lock("orders:42");     // owner: <client uuid>:<n>, this handle's
  {
    std::scoped_lock hold(lock);                    // waits via pub/sub; the watchdog renews every 10 s
    std::printf("held, hold count %lld\n", static_cast<long long>(lock.hold_count()));
  }                                                 // released here; unlock() never throws
  if (lock.try_lock(std::chrono::seconds(2), std::chrono::seconds(10))) {  // wait 2 s, lease 10 s
    lock.unlock_or_throw();                         // throws with Redisson's text if not the owner
  }
  return EXIT_SUCCESS;
}
