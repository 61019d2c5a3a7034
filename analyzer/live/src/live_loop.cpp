#include "lockscope/live/live_loop.hpp"

#include <algorithm>
#include <climits>

namespace lockscope::live {

namespace {

// Packets taken from the capture per turn of the loop, between looks at the clock.
constexpr int packets_per_pass = 256;

}  // namespace

live_result run_live(const live_options& options, const live_parts& parts, lock_event_sink& output,
                     const locks::lock_pipeline::filter_factory& filter,
                     const std::function<void(const locks::lock_timeline&)>& finished) {
  ingest::packet_source& source = parts.source;
  recorder_hooks& hooks = parts.recorder;
  metrics_server* const metrics = parts.metrics;
  lock_event_tee to_metrics(output, metrics ? &metrics->metrics() : nullptr);
  locks::pipeline_options po = options.pipeline;
  po.threads = 1;
  locks::lock_pipeline pipeline(po, hooks.chain(metrics ? static_cast<lock_event_sink&>(to_metrics) : output), filter);
  if (options.warn) pipeline.recognizer().set_warning_handler(options.warn);
  if (metrics) {
    metrics->attach([&] {
      return gather_capture_gauges(pipeline.ingest(), pipeline.recognizer(), pipeline.timeline(), source,
                                   po.capture.max_flows, po.timeline.max_locks);
    });
  }
  // The live loop's clock: the wall clock, or a replay's packet times.
  auto now_us = [&source] { return source.now_us(); };
  // Live, the clock may pass only what no packet still in the kernel's ring can precede:
  // when packets were handed over, the newest of them (the ring keeps their order; out of
  // immediate mode the capture lets a whole burst gather before taking it), else the wall
  // clock less what a packet may still wait in a block the kernel has not handed over
  // (its timeout, out of immediate mode). A deadline must not fire before a renewal
  // captured in time and still in the ring. A replay's clock already stops at its next packet.
  // The kernel runs a block's timeout late on a busy host (a block handed over 112 ms
  // after its first packet, idle): while it says it holds packets not handed over, the
  // clock waits at the newest handed over, for at most held_back_max_us.
  const bool live = source.live();
  const std::int64_t idle_lag_us = 5000 + (live && !options.immediate ? ingest::live_options{}.timeout_ms * 1000 : 0);
  constexpr std::int64_t held_back_max_us = 1'000'000;
  std::int64_t newest_packet_us = INT64_MIN;
  const bool hooks_active = hooks.active();
  // The operations of a turn's packets reach the timeline together, at the end of the
  // turn (larger windows for its staged loads, a flush per turn rather than per packet).
  // The flight recorder and --write see each packet before the next one is ingested:
  // its events must have reached the recorder by then (what it saves is what came before).
  auto on_packet = [&](const captured_packet& p) {
    if (hooks_active) {
      hooks.on_loop(&p, now_us());
      pipeline.on_packet(p.ts_us, p.link_type, p.data);
      pipeline.flush();
    } else {
      pipeline.on_packet(p.ts_us, p.link_type, p.data);
    }
    newest_packet_us = std::max(newest_packet_us, p.ts_us);
  };
  while (!(options.stop_requested && options.stop_requested())) {
    const auto r = source.dispatch(packets_per_pass, on_packet);
    pipeline.flush();
    if (r == ingest::packet_source::result::end) break;
    const bool got = r == ingest::packet_source::result::packet;
    const std::int64_t now = now_us();
    if (!got) hooks.on_loop(nullptr, now);
    // Lease deadlines pass on the clock even when the lock's traffic stops.
    const std::int64_t clock = !live ? now - 5000
                               : got ? std::min(now - 5000, newest_packet_us)
                               : source.holds_unhanded_packets() ? std::max(newest_packet_us, now - held_back_max_us)
                                                                 : now - idle_lag_us;
    pipeline.advance_to(clock);  // packets carry capture times slightly behind now
    if (options.on_turn) options.on_turn(got);
    if (metrics) metrics->poll();
  }
  if (live && options.stop_requested && options.stop_requested()) {
    // Stopped (a signal): what the kernel captured before is still read, so the report
    // ends where the capture did, not up to a block's timeout (more on a busy host) early.
    source.drain_all(packets_per_pass, on_packet, held_back_max_us);
    pipeline.flush();
  }
  pipeline.finish_ingest();
  pipeline.finish(now_us());
  if (finished) finished(pipeline.timeline());
  live_result r;
  r.capture = pipeline.ingest().stats();
  r.recognizer = pipeline.recognizer().stats();
  r.locks = pipeline.timeline().lock_count();
  return r;
}

}  // namespace lockscope::live
