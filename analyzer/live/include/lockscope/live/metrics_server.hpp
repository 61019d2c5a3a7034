// `lockscope analyze -i IFACE --metrics-listen ADDR:PORT`: GET /metrics over HTTP/1.1
// (Boost.Beast), the text lock_metrics renders.
//
// Threads: the listener and its connections run on a thread of their own; the metrics
// live on the capture thread and are only ever touched there. A scrape asks for a fresh
// snapshot (an atomic flag); the capture loop sees it in poll() (each packet, and at
// least every 100 ms: the capture's read timeout), renders on its own thread and hands
// the text over under a mutex. The HTTP thread waits for it at most 500 ms (then serves
// the previous one), and a snapshot younger than 100 ms is served as is, so scrapers
// cost the capture at most one render per 100 ms, and a slow or broken scraper costs it
// nothing: it only holds its own connection, which times out after 10 s.
// Requests: GET and HEAD of /metrics, any query ignored (other paths 404, other methods 405), headers at
// most 8 KiB, no body, at most 16 connections at once (more are closed at once).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "lockscope/ingest/capture.hpp"
#include "lockscope/ingest/ingest_pipeline.hpp"
#include "lockscope/live/lock_metrics.hpp"
#include "lockscope/locks/lock_recognizer.hpp"
#include "lockscope/locks/lock_timeline.hpp"
#include "lockscope/live/vocabulary.hpp"

namespace lockscope::live {

class metrics_server {
 public:
  // Binds ADDR:PORT (IPv6: [ADDR]:PORT) and starts serving. Throws std::runtime_error
  // naming ADDR:PORT when the address is bad or cannot be bound.
  metrics_server(const std::string& listen, const metrics_options& options);
  ~metrics_server();
  metrics_server(const metrics_server&) = delete;
  metrics_server& operator=(const metrics_server&) = delete;

  // The address bound, as ADDR:PORT (IPv6: [ADDR]:PORT): with port 0, the one the
  // kernel chose.
  std::string address() const;

  // Capture thread only.
  lock_metrics& metrics() noexcept;
  // What each render reports besides the locks (called on the capture thread).
  void attach(std::function<capture_gauges()> gather);
  // Capture thread, every loop turn: renders when a scraper waits for a snapshot.
  void poll();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// Opens the endpoint and says where it serves ("lockscope COMMAND: serving metrics at
// http://127.0.0.1:41233/metrics": --metrics-listen 127.0.0.1:0 lets the kernel choose
// the port), or prints "lockscope COMMAND: --metrics-listen ADDR:PORT: <why>" and returns
// nullptr.
std::unique_ptr<metrics_server> open_metrics_server(const char* command, const std::string& listen,
                                                    std::size_t max_locks);

// The live analyzer's counters and store sizes, and this process's resident memory.
capture_gauges gather_capture_gauges(const ingest::ingest_pipeline& ingest,
                                               const locks::lock_recognizer& recognizer,
                                               const locks::lock_timeline& timeline,
                                               const ingest::packet_source& live, std::size_t max_flows,
                                               std::size_t max_locks);

}  // namespace lockscope::live
