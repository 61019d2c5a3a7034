// Formatting a long output (the summary table) on two threads, written in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

namespace lockscope::locks {

// Batches 0 .. batches-1: thread 0 (the caller) formats the even ones, thread 1 (a
// helper) the odd ones. format(batch, thread, text) formats a batch, points `text` at it
// (valid until that thread's next batch) and returns the batch's count (of rows, say);
// each thread waits for its batch's turn to write(text), so the output is in order and
// at most two batches are held in memory. Returns the counts' sum. An exception from
// write on either thread stops both and is rethrown here (format is not to throw).
std::uint64_t write_batches_on_two_threads(
    std::size_t batches, const std::function<std::uint64_t(std::size_t batch, unsigned thread, std::string_view& text)>& format,
    const std::function<void(std::string_view)>& write);

}  // namespace lockscope::locks
