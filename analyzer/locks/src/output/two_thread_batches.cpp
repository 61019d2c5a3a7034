#include "output/two_thread_batches.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace lockscope::locks {

std::uint64_t write_batches_on_two_threads(
    std::size_t batches, const std::function<std::uint64_t(std::size_t batch, unsigned thread, std::string_view& text)>& format,
    const std::function<void(std::string_view)>& write) {
  std::mutex mutex;
  std::condition_variable turn_changed;
  std::size_t turn = 0;  // the batch whose rows are written next
  bool failed = false;
  std::uint64_t total = 0;
  auto run = [&](unsigned thread) {
    for (std::size_t b = thread; b < batches; b += 2) {
      std::string_view text;
      const std::uint64_t count = format(b, thread, text);
      std::unique_lock guard(mutex);
      turn_changed.wait(guard, [&] { return turn == b || failed; });
      if (failed) return;
      try {
        if (!text.empty()) write(text);  // only this thread writes now
      } catch (...) {
        failed = true;
        turn_changed.notify_all();
        throw;
      }
      total += count;
      ++turn;
      turn_changed.notify_all();
    }
  };
  std::exception_ptr helper_error;
  std::thread helper([&] {
    try {
      run(1);
    } catch (...) {
      helper_error = std::current_exception();
    }
  });
  try {
    run(0);
  } catch (...) {
    {
      std::lock_guard guard(mutex);
      failed = true;
    }
    turn_changed.notify_all();
    helper.join();
    throw;
  }
  helper.join();
  if (helper_error) std::rethrow_exception(helper_error);
  return total;
}

}  // namespace lockscope::locks
