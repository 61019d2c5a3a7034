// Pairing replies with commands, and the connection states that change pairing.
#include "lockscope/ingest/resp_session.hpp"
#include "lockscope/ingest/redaction.hpp"
#include "lockscope/ingest/short_bytes.hpp"
#include "session_internal.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <memory>
#include <utility>

namespace lockscope::ingest {

using namespace session_detail;

namespace {
// A value with no parts of its own (no aggregate, attribute, push or streamed chunk).
constexpr bool is_plain_scalar(resp::type t) noexcept {
  switch (t) {
    case resp::type::null:
    case resp::type::integer:
    case resp::type::simple_string:
    case resp::type::simple_error:
    case resp::type::bulk_string:
    case resp::type::boolean:
    case resp::type::double_:
    case resp::type::big_number:
    case resp::type::bulk_error:
    case resp::type::verbatim_string:
      return true;
    default:
      return false;
  }
}
// What a ring slot keeps of its buffers for the next command: an ordinary command's.
constexpr std::size_t slot_keeps = 4u << 10;
constexpr std::size_t reply_keeps = 16u << 10;
}  // namespace

void resp_session::grow_ring() {
  // Keeping the order: head first, then the slot being filled.
  std::vector<pending_command> grown(ring_.size() * 2);
  for (std::size_t i = 0; i < ring_.size(); ++i) {
    grown[i] = std::move(ring_[ring_index(head_ + i)]);
  }
  ring_.swap(grown);
  ring_mask_ = ring_.size() - 1;
  head_ = 0;
}

resp_session::pending_command& resp_session::tail_slot() {
  if (count_ > ring_mask_) grow_ring();  // no free slot
  return ring_[ring_index(head_ + count_)];
}

void resp_session::commit_tail() {
  pending_command& c = ring_[ring_index(head_ + count_)];
  c.footprint = c.whole.empty() ? c.command.footprint() : c.whole.footprint();
  pending_bytes_ += c.footprint;
  ++count_;
  while (count_ > 1 && (count_ > options_.max_pending || pending_bytes_ > options_.max_pending_bytes)) {
    ++stats_.pending_overflow;
    // Its reply, should it come after all (a deep pipeline, not a capture of one
    // direction), is skipped as shed()'s are, so that later replies pair with their own.
    if (front().expect == expect_reply) ++replies_to_skip_;
    emit(front(), nullptr);
    pop_front();
  }
}

void resp_session::pop_front() {
  // The command answered a few replies from now: pipelined replies come in runs (a
  // segment answers many commands), and by then each command is long out of the cache.
  // Two stages: the slot (which says where the command's bytes are) further ahead,
  // then the bytes.
  constexpr std::size_t slot_distance = 12, bytes_distance = 6;
  if (count_ > slot_distance) __builtin_prefetch(&ring_[ring_index(head_ + slot_distance)]);
  if (count_ > bytes_distance) ring_[ring_index(head_ + bytes_distance)].prefetch();
  pending_command& c = ring_[head_];
  pending_bytes_ -= c.footprint;
  c.footprint = 0;
  // A large command's buffers go: the ring keeps only ordinary capacity per slot (a
  // ring grown by a deep pipeline keeps its slots, each with what it holds).
  // (Most slots hold no more than that: cleared in place, without the calls.)
  if (c.command.holds_at_most(slot_keeps)) c.command.clear();
  else retained_ -= c.command.clear_and_trim(slot_keeps);
  if (c.whole.holds_at_most(slot_keeps)) c.whole.clear();
  else retained_ -= c.whole.clear_and_trim(slot_keeps);
  head_ = ring_index(head_ + 1);
  --count_;
}

std::size_t resp_session::held_bytes() const noexcept {
  return ring_.size() * sizeof(pending_command) + retained_ + reply_.capacity_bytes() + sides_[0].held.capacity() +
         sides_[1].held.capacity() + sides_[0].resync_buffer.capacity() + sides_[1].resync_buffer.capacity();
}

void resp_session::shed() {
  // Still deciding which end is the client: decide now (as when the window fills), so
  // that what was held becomes commands that can be shed.
  if (client_side_ < 0 && !ignored_ && !held_chunks_.empty()) decide(true);
  for (side_state& s : sides_) {
    if (s.resync_buffer.empty()) std::string().swap(s.resync_buffer);  // capacity left by a resync
  }
  if (reply_.nodes().empty()) reply_.clear_and_trim(0);  // no reply under way
  while (count_ > 0 && front().expect == expect_reply) {
    ++stats_.pending_shed;
    ++replies_to_skip_;
    emit(front(), nullptr);
    pop_front();
  }
  // The slots still in use, and the one being filled (a command built node by node may
  // be under way in it), move to a ring of their size; the others go with their buffers.
  const std::size_t moved = std::min(count_ + 1, ring_.size());
  const std::size_t slots = std::max<std::size_t>(8, std::bit_ceil(moved));
  if (slots < ring_.size()) {
    std::vector<pending_command> smaller(slots);
    for (std::size_t i = 0; i < moved; ++i) smaller[i] = std::move(ring_[ring_index(head_ + i)]);
    ring_.swap(smaller);
    ring_mask_ = slots - 1;
    head_ = 0;
    retained_ = 0;
    for (std::size_t i = 0; i < moved; ++i) retained_ += ring_[i].command.capacity_bytes() + ring_[i].whole.capacity_bytes();
  }
}

void resp_session::drop_pending(bool emit_unanswered) {
  while (count_ > 0) {
    if (emit_unanswered) emit(front(), nullptr);
    pop_front();
  }
}

void resp_session::on_client_node(const resp::node& n) {
  if (!sides_certain_ && contradicts_client(n)) {
    correct_pending_ = true;
    sides_[client_side_].decoder->pause();
    return;
  }
  pending_command& c = tail_slot();
  const std::size_t before = c.command.capacity_bytes();
  c.command.add(n, options_.max_message_bytes);
  retained_ += c.command.capacity_bytes() - before;
  if (n.ends_message()) command_complete(c);
}

bool resp_session::on_client_array(std::string_view frame, std::span<const std::string_view> elements) {
  // Text beyond the limit is cut, and counted, by message::add alone.
  if (frame.size() > options_.max_message_bytes) return false;
  if (!sides_certain_) {
    // What contradicts_client would find in this array's nodes: only its first word can
    // tell (a whole array of bulk strings is otherwise what a client sends). A
    // contradiction is left to the node path, which pauses at the right byte.
    if (first_word_contradicts(elements[0], false)) return false;
    first_word_next_ = false;
  }
  pending_command& c = tail_slot();
  retained_ += c.whole.assign(frame, elements, interner_);
  command_complete(c);
  return true;
}

std::size_t resp_session::whole_command::assign(std::string_view frame, std::span<const std::string_view> elements,
                                                argument_interner* interner) {
  std::size_t grown = 0;
  interned_.reset();
  const std::size_t count = elements.size();
  // One long argument the interner holds (the first): viewed there, and cut out of the
  // copy. The compare happens now, while the frame and the entry are in the cache.
  std::size_t cut_at = frame.size();  // where the interned argument's bytes start in the frame
  std::size_t cut = 0;                // and their length
  if (interner != nullptr) {
    const std::size_t min_bytes = interner->min_bytes();
    for (std::size_t k = 0; k < count; ++k) {
      if (elements[k].size() < min_bytes) continue;
      if (argument_interner::entry* e = interner->acquire(elements[k])) {
        interned_.reset(e);
        interned_argument_ = static_cast<std::uint32_t>(k);
        cut_at = static_cast<std::size_t>(elements[k].data() - frame.data());
        cut = elements[k].size();
        break;
      }
    }
  }
  const std::size_t kept = frame.size() - cut;
  if (capacity_ < kept) {
    grown -= capacity_;
    capacity_ = std::max(kept, capacity_ * 2);
    grown += capacity_;
    bytes_ = std::make_unique_for_overwrite<char[]>(capacity_);
  }
  char* const bytes = bytes_.get();
  size_ = kept;
  // What is left around an interned script is short (tens of bytes): copy_bytes, not memcpy.
  copy_bytes(bytes, frame.substr(0, cut_at));
  copy_bytes(bytes + cut_at, frame.substr(cut_at + cut));
  if (arguments_.size() < count) {
    grown -= arguments_.capacity() * sizeof(std::string_view);
    arguments_.resize(count);
    grown += arguments_.capacity() * sizeof(std::string_view);
  }
  count_ = count;
  std::string_view* const to = arguments_.data();
  std::size_t values = 0;
  // Arguments before the interned one keep their offsets, those after it moved back by
  // its length (with none interned, every argument is before it: count).
  const std::size_t split = interned_ != nullptr ? interned_argument_ : count;
  const char* const moved = bytes - cut;
  for (std::size_t k = 0; k < split; ++k) {
    const std::string_view e = elements[k];
    to[k] = std::string_view(bytes + (e.data() - frame.data()), e.size());
    values += e.size();
  }
  if (interned_ != nullptr) {
    to[split] = interned_->text();
    values += cut;
    for (std::size_t k = split + 1; k < count; ++k) {
      const std::string_view e = elements[k];
      to[k] = std::string_view(moved + (e.data() - frame.data()), e.size());
      values += e.size();
    }
  }
  // An array node, a node per element, and their text.
  footprint_ = (count + 1) * sizeof(message_node) + values;
  return grown;
}

std::size_t resp_session::whole_command::clear_and_trim(std::size_t keep) noexcept {
  clear();
  std::size_t freed = 0;
  if (capacity_ > keep) {
    freed += capacity_;
    bytes_.reset();
    capacity_ = 0;
    size_ = 0;
  }
  if (const std::size_t args = arguments_.capacity() * sizeof(std::string_view); args > keep) {
    freed += args;
    std::vector<std::string_view>().swap(arguments_);
  }
  return freed;
}

void resp_session::on_server_node(const resp::node& n) {
  if (replication_ == replication::stream) {
    // Commands the master propagates: skipped.
    stats_.replication_bytes += n.value.size();
    return;
  }
  // The usual reply (nil, an integer, +OK, a short string: one whole node, none before
  // it) to the usual command (no state to change, nothing skipped or lost, no MONITOR):
  // paired at once. reply_complete() would find the same, after its checks of
  // aggregates, pushes and connection states.
  if (n.ends_message() && reply_.empty() && is_plain_scalar(n.type) && !n.is_partial() &&
      n.value.size() <= options_.max_message_bytes && !monitor_ && count_ > 0 && replies_to_skip_ == 0 &&
      !server_lost_replies_ && front().expect == expect_reply) {
    reply_.add_whole(n);
    emit(front(), &reply_);
    pop_front();
    if (reply_.capacity_bytes() > reply_keeps) reply_.clear_and_trim(reply_keeps);
    else reply_.clear();
    return;
  }
  reply_.add(n, options_.max_message_bytes);
  if (n.ends_message()) {
    reply_complete();
    // A large reply's buffers go (up to max_message_bytes each): every connection of a
    // busy port may once read a large value, and would keep that much for good.
    if (reply_.capacity_bytes() > reply_keeps) reply_.clear_and_trim(reply_keeps);
    else reply_.clear();
  }
}

void resp_session::command_complete(pending_command& c) {
  c.at_us = now_us_;
  c.secrets.clear();
  c.expect = expect_reply;
  c.hello_protocol = 0;
  c.reply_checks = 0;
  ++stats_.commands;
  if (replica_link_) {  // REPLCONF ACK from a replica: never answered, not shown
    c.clear_command();
    return;
  }
  std::string_view name;
  bool unbalanced = false;
  if (c.whole.empty()) {
    const auto nodes = c.command.nodes();
    if (nodes.size() < 2 || nodes[0].type != resp::type::array) {
      c.command.clear();
      return;
    }
    unbalanced = (nodes[0].flags & resp::node_flags::unbalanced_quotes) != 0;
    if ((nodes[0].flags & resp::node_flags::inline_command) != 0) inline_seen_ = true;
    name = c.command.text(nodes[1]);
  } else {
    name = c.whole.arguments()[0];
  }
  std::vector<std::string_view>& args = arguments_;
  args.clear();
  // Most commands need only their name here: the whole argument list is split only
  // for the few that change the connection's state or may carry a secret. Every one
  // of those starts with one of these letters; the rest (EVAL, GET, ...) skip the
  // comparisons.
  // (A bit per letter, either case: one test instead of a search.)
  constexpr std::uint32_t special_initials = [] {
    std::uint32_t bits = 0;
    for (const char letter : std::string_view("ahmcrspu")) bits |= 1u << (letter - 'a');
    return bits;
  }();
  const auto initial = static_cast<unsigned>(static_cast<unsigned char>(name.empty() ? 0 : name[0]) | 0x20) - 'a';
  const bool ordinary = name.empty() || initial >= 26 || (special_initials >> initial & 1u) == 0;
  if (ordinary && !unbalanced && !server_closing_ && reply_mode_ == reply_mode::on && transaction_checks_ == 0) {
    commit_tail();  // the usual command: nothing below applies to it
    return;
  }
  const bool secrets = !ordinary && may_carry_secrets(name);
  if (secrets || (!ordinary && (iequals(name, "HELLO") || iequals(name, "CLIENT") || iequals(name, "REPLCONF")))) {
    c.arguments(args);
  } else {
    args.push_back(name);
  }
  if (secrets) {
    find_secrets(args, c.secrets);
    c.reply_checks = reply_checks(args, !c.secrets.empty());
  }
  if (c.reply_checks != 0 || transaction_checks_ != 0 || (!ordinary && iequals(name, "MULTI"))) {
    note_transaction(c, name, args);
  }
  if (server_closing_) {
    c.expect = expect_nothing;
    commit_tail();
    return;
  }
  if (unbalanced) {
    // redis-server answers `-ERR Protocol error: unbalanced quotes in request`, then
    // closes: what the client sent after it is never answered.
    c.expect = expect_protocol_error;
    server_closing_ = true;
    commit_tail();
    return;
  }
  if (ordinary) {
    // nothing to track
  } else if (iequals(name, "HELLO")) {
    c.expect = expect_hello;
    if (args.size() >= 2) {
      unsigned v = 0;
      std::from_chars(args[1].data(), args[1].data() + args[1].size(), v);
      c.hello_protocol = static_cast<std::uint8_t>(v);
    }
  } else if (iequals(name, "REPLCONF") && args.size() >= 2 && iequals(args[1], "ACK")) {
    // A replica acknowledging its offset (never answered): this is a replication link
    // joined after its PSYNC; what the master sends is the replication stream.
    replica_link_ = true;
    replication_ = replication::stream;
    drop_pending(true);
    reply_.clear();
    c.clear_command();
    return;
  } else if (is_confirmation_kind(name)) {
    c.expect = expect_confirmation;
  } else if (iequals(name, "RESET")) {
    c.expect = expect_reset;
  } else if (iequals(name, "MONITOR")) {
    c.expect = expect_monitor;
  } else if (iequals(name, "PSYNC") || iequals(name, "SYNC")) {
    c.expect = expect_replication;
    replica_link_ = true;
    replication_ = replication::preamble;
    rdb_line_.clear();
  } else if (iequals(name, "CLIENT") && args.size() >= 3 && iequals(args[1], "REPLY")) {
    if (iequals(args[2], "OFF")) {
      reply_mode_ = reply_mode::off;
      emit(c, nullptr);
      c.clear_command();
      return;
    }
    if (iequals(args[2], "SKIP")) {
      if (reply_mode_ != reply_mode::off) reply_mode_ = reply_mode::skip_next;
      emit(c, nullptr);
      c.clear_command();
      return;
    }
    if (iequals(args[2], "ON")) {
      reply_mode_ = reply_mode::on;
      commit_tail();
      return;
    }
  }
  if (reply_mode_ != reply_mode::on) {
    if (reply_mode_ == reply_mode::skip_next) reply_mode_ = reply_mode::on;
    emit(c, nullptr);
    c.clear_command();
    return;
  }
  commit_tail();
}

void resp_session::note_transaction(pending_command& c, std::string_view name, std::span<const std::string_view> args) {
  if (iequals(name, "MULTI")) {
    in_transaction_ = true;
    return;
  }
  // Outside MULTI (or after an EXEC not looked at, there being nothing to look for) this
  // counts a command as queued: EXEC's reply is then checked for nothing it holds.
  if (c.reply_checks != 0 && in_transaction_) {
    transaction_checks_ |= c.reply_checks;
    for (const std::uint32_t i : c.secrets) {
      if (i >= args.size()) continue;
      if (transaction_secrets_.size() < max_transaction_secrets) transaction_secrets_.emplace_back(args[i]);
      else transaction_checks_ |= reply_every_string;
    }
    return;
  }
  if (iequals(name, "EXEC")) {
    c.reply_checks = transaction_checks_ | reply_in_transaction;
    transaction_checks_ = 0;
    in_transaction_ = false;
  } else if (iequals(name, "DISCARD")) {
    transaction_checks_ = 0;
    in_transaction_ = false;
  }
}

void resp_session::reply_complete() {
  const std::size_t root = reply_.root();
  if (root == message::npos) return;
  const message_node& top = reply_.nodes()[root];

  // First, second and third elements of an aggregate (pub/sub frames).
  const message_node* elements[3] = {nullptr, nullptr, nullptr};
  if (top.type == resp::type::array || top.type == resp::type::push) {
    std::size_t k = 0;
    reply_.for_each_child(root, [&](const message_node& e) {
      elements[k++] = &e;
      return k < 3;
    });
  }
  const std::string_view kind =
      elements[0] != nullptr && (elements[0]->type == resp::type::bulk_string ||
                                 elements[0]->type == resp::type::simple_string)
          ? reply_.text(*elements[0])
          : std::string_view();
  auto update_subscriptions = [&] {
    if (protocol_ == 2 && elements[2] != nullptr && elements[2]->type == resp::type::integer) {
      subscribed_ = elements[2]->integer > 0;
    }
  };
  auto front_awaits = [&](std::string_view confirmation) {
    if (count_ == 0 || front().expect != expect_confirmation) return false;
    front().arguments(arguments_);
    if (arguments_.empty() || !iequals(arguments_[0], confirmation)) return false;
    if (arguments_.size() == 1) return true;  // UNSUBSCRIBE with no channel: any
    return elements[1] != nullptr && reply_.text(*elements[1]) == arguments_[1];
  };

  if (monitor_) {
    // A server older than 6.2 shows some passwords in MONITOR lines.
    std::string& masked = monitor_scratch_;
    masked.clear();
    if (!options_.show_secrets && top.type == resp::type::simple_string && mask_monitor_line(reply_.text(top), masked)) {
      redacted_reply_.set_single(resp::type::simple_string, masked);
      emit_push(redacted_reply_);
      return;
    }
    emit_push(reply_);
    return;
  }
  if (top.type == resp::type::push) {
    if (is_confirmation_kind(kind) && front_awaits(kind)) {
      emit(front(), &reply_);
      pop_front();
      return;
    }
    emit_push(reply_);
    return;
  }
  if (top.type == resp::type::array && !kind.empty()) {
    if (is_message_kind(kind) && (subscribed_ || count_ == 0)) {
      if (protocol_ == 2) subscribed_ = true;  // a capture that began mid-subscription
      emit_push(reply_);
      return;
    }
    if (is_confirmation_kind(kind)) {
      if (front_awaits(kind)) {
        update_subscriptions();
        emit(front(), &reply_);
        pop_front();
        return;
      }
      if (subscribed_ || count_ == 0) {
        update_subscriptions();
        emit_push(reply_);
        return;
      }
    }
  }
  if (replies_to_skip_ > 0 && !server_lost_replies_) {
    --replies_to_skip_;  // a command shed() emitted unanswered
    return;
  }
  if (count_ == 0) {
    ++stats_.unpaired_replies;
    server_lost_replies_ = false;
    return;
  }
  if (server_lost_replies_) {
    replies_to_skip_ = 0;  // how many of the lost replies were theirs is unknown
    // A server answers a request/response client's latest command next; the older
    // ones had their replies in the lost bytes.
    server_lost_replies_ = false;
    while (count_ > 1) {
      emit(front(), nullptr);
      pop_front();
    }
  }
  pending_command& c = front();
  const bool error = top.type == resp::type::simple_error || top.type == resp::type::bulk_error;
  switch (c.expect) {
    case expect_hello:
      if (!error && c.hello_protocol >= 2) protocol_ = c.hello_protocol;
      break;
    case expect_reset:
      subscribed_ = false;
      protocol_ = 2;
      reply_mode_ = reply_mode::on;
      monitor_ = false;
      break;
    case expect_monitor:
      if (!error) monitor_ = true;
      break;
    case expect_confirmation:
      // RESP3 confirmations arrive as pushes; this is an error reply.
      break;
    case expect_protocol_error:
      // The server closes after this reply: nothing sent after it is answered.
      emit(c, &reply_);
      pop_front();
      drop_pending(true);
      return;
    default:
      break;
  }
  emit(c, &reply_);
  pop_front();
}

void resp_session::emit(pending_command& c, const message* reply) {
  exchange e = make_exchange(exchange_kind::exchange);
  if (reply != nullptr && c.reply_checks != 0 && !options_.show_secrets) {
    // Only the few commands whose replies may show a secret get here (reply_checks).
    secret_values_.clear();
    if ((c.reply_checks & reply_in_transaction) != 0) {
      // EXEC: the secrets of the commands queued (the connection's last few transactions).
      secret_values_.assign(transaction_secrets_.begin(), transaction_secrets_.end());
    } else if (!c.secrets.empty()) {
      c.arguments(arguments_);
      for (const std::uint32_t i : c.secrets) {
        if (i < arguments_.size()) secret_values_.push_back(arguments_[i]);
      }
    }
    redacted_reply_ = *reply;
    const auto checks = static_cast<std::uint8_t>(c.reply_checks & ~reply_in_transaction);
    if (redact_reply(checks, secret_values_, redacted_reply_)) reply = &redacted_reply_;
  }
  if (!c.whole.empty() && (c.secrets.empty() || options_.show_secrets)) {
    e.command = c.whole.arguments();  // nothing to redact: the views as they are
    e.interned_identity = c.whole.interned_identity();
    e.interned_argument = c.whole.interned_argument();
  } else {
    c.arguments(arguments_);
    if (c.whole.empty()) {  // a whole command is within every limit
      e.command_arguments_not_kept = c.command.dropped_nodes();
      e.command_bytes_not_kept = c.command.truncated_bytes();
    }
    if (!options_.show_secrets) {
      for (const std::uint32_t i : c.secrets) {
        if (i < arguments_.size()) arguments_[i] = "****";
      }
    }
    e.command = arguments_;
    if (!c.whole.empty() && c.whole.interned_identity() != 0 &&
        arguments_[c.whole.interned_argument()].data() == c.whole.arguments()[c.whole.interned_argument()].data()) {
      // Not redacted: still the entry's text.
      e.interned_identity = c.whole.interned_identity();
      e.interned_argument = c.whole.interned_argument();
    }
  }
  e.request_us = c.at_us;
  e.reply_us = reply != nullptr ? now_us_ : -1;
  e.reply = reply;
  e.connection_sequence = static_cast<std::uint32_t>(stats_.exchanges);
  ++stats_.exchanges;
  sink_.on_exchange(e);
}

void resp_session::emit_push(const message& m) {
  exchange e = make_exchange(exchange_kind::push);
  e.request_us = now_us_;
  e.reply = &m;
  ++stats_.pushes;
  sink_.on_exchange(e);
}

}  // namespace lockscope::ingest
