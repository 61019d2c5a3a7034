// Stage 2b of `lockscope analyze`: lock events in, the same events plus lock groups out.
//
//   lock_groups g(options, report);      // a lock_event_sink, downstream of the timeline
//   lock_timeline t(timeline_options, g);
//   ... t.finish(end_us);  g.finish(end_us);
//
// It sees only the timeline's events (no operation, no connection): every event is
// passed on unchanged, and group events and anomalies are added.
//
// Quorum groups (RedLock: node-redlock, redsync, Redisson's RedLock). The same key on
// several servers is several locks (lock_timeline.hpp); an ATTEMPT is one owner trying
// that key (acquired or contended) on at least two servers within `window_us` of its
// first try. "One owner" is the same owner/token (node-redlock and redsync send one
// value to every server), or for Redisson owner ids `<uuid>:<thread>` (a RedLock spans
// one client instance, hence one UUID, per server) the same client IP and thread id.
// An attempt ends when the window passes, when the owner tries a server a second time
// (its next round), or when anything else happens to the key on one of its servers
// (release, expiry, renewal: the client has moved on), or once every server the key is
// known on has answered with a quorum granted (a failed attempt waits for its clean-up
// releases: `released`); then one `quorum` event reports
// it: servers = the distinct servers the key was seen on so far in the capture (a
// server never seen cannot be counted), acquired_on = those it acquired, needed =
// servers/2 + 1. Its time is the attempt's last vote.
// A successful attempt is followed as a quorum holding: a release takes the server out
// of it, and so do an expiry and a refused renewal (lost, not given back):
//   quorum_lost    the servers still held fell below `needed` by expiry or refused
//                  renewals while the holder still acts as the holder (it renews on
//                  the rest, or its refused renewals come in the same round as a
//                  successful one); once per holding
//   split_quorum   two owners each hold `needed` servers of one key at the same time
//                  (a server lost or forgot a key: failover, restart); once per holding
// MultiLock groups (Redisson's MultiLock, node-redlock's multi-key lock): one owner on
// one connection trying two or more different keys within `window_us` of its first
// try. It ends like an attempt (window, a key tried again, a release of its keys); a
// `multilock` event reports the keys, those acquired, and the all-or-nothing outcome:
// all acquired, or failed (some acquired, and released when the owner gave up). A
// MultiLock gives its keys back together (Redisson sends every unlock at once, a
// multi-key script or DEL frees them in one reply): keys given back one by one, some
// still held `release_together_us` after the first went (a job worker's one token for
// each job it takes, each job's lock freed when that job is done), were taken one by
// one, and the set ends unreported. Locking two keys one after the other in quick succession reads the same, unless
// the first was refused: a MultiLock tries its next key only while it holds every key
// before it, so a different key tried after a refusal (at another time than the refused
// call: a multi-key script's keys share its reply) starts a new set.
// A value several clients send at once (lock_event::owner_shared: refused over one
// connection while it holds over another to the same server) forms no quorum attempt.
//
// Memory: per key seen on two or more servers, its servers and live holdings; per open
// attempt or set (at most max_open of them), its members. Records are reused: no
// allocation per event once warm.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "lockscope/locks/lock_timeline.hpp"

namespace lockscope::locks {

struct group_options {
  std::int64_t window_us = 1'000'000;  // an attempt's tries fall within this of its first
  // Attempts and sets open at once (every try opens one until its window ends): beyond,
  // the oldest ends early, so memory stays bounded (~3 MB) whatever the rate.
  std::size_t max_open = 8192;
  // A set of more keys than this within the window is no MultiLock but a stream of
  // independent locks (a client taking lock after lock, leases left to expire): it is
  // dropped unreported, and each try stays O(1).
  std::size_t max_set_keys = 16;
  // A set's keys given back within this of the first one's release were given back
  // together (a MultiLock's unlock); one still held past it ends the set unreported.
  std::int64_t release_together_us = 20'000;
  // A set whose keys were each tried within this of the one before (a MultiLock's next
  // key asked for as the last one's reply comes) is reported when it closes; one taken
  // further apart only once its keys are given back together, or the capture ends.
  std::int64_t back_to_back_us = 5'000;
  // Lookups first compare the entry looked up last (a client's pipelined calls come in
  // runs); false: every lookup hashes its key. The same events either way (a test
  // compares them); false is only for that test.
  bool lookup_shortcuts = true;
  // A set of one key (what nearly every try opens: a lock taken alone) is kept as a
  // compact copy beside its timer, becomes a record only when its owner's next try finds
  // it, and is closed in place by a release of its key. false: a record at once. The
  // same events either way (a test compares them); false is only for that test.
  bool compact_single_sets = true;
  // A set of one key tried again by its owner over its connection (a waiter's next try)
  // is opened again in place, not closed and looked up again to be reopened. false: closed
  // and reopened. The same events either way (a test compares them); false is only for
  // that test.
  bool reopen_retried_sets = true;
};

class lock_groups final : public lock_event_sink {
 public:
  lock_groups(const group_options& options, lock_event_sink& next);
  ~lock_groups() override;
  lock_groups(const lock_groups&) = delete;
  lock_groups& operator=(const lock_groups&) = delete;

  void on_event(const lock_event& e) override;
  // Ends the attempts and sets whose window has passed by now_us (live: no traffic).
  void advance_to(std::int64_t now_us);
  // End of the capture: reports every attempt and set still open.
  void finish(std::int64_t end_us);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace lockscope::locks
