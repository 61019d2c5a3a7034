// Redis Cluster: a call answered -MOVED/-ASK/-TRYAGAIN/-CLUSTERDOWN is marked
// redirected (with the reply's slot and target), an answered ASKING marks its
// connection's next call `asking`, and the nodes a MOVED/ASK target or a CLUSTER SLOTS
// or CLUSTER SHARDS reply names are reported as `cluster_link` operations (the timeline
// keys a cluster's locks by the cluster, not the node).
#include <fmt/format.h>

#include "recognize/recognizer_state.hpp"

namespace lockscope::locks {

using namespace recognizer_detail;

using resp::iequals;

void lock_recognizer::state::on_asking(command_call& c) {
  if (c.reply.kind == reply_view::shape::ok) asking.insert(c.e.connection);
}

void lock_recognizer::state::on_error_reply(command_call& c) {
  const exchange& e = c.e;
  const std::string_view text = e.reply->text(e.reply->nodes()[c.reply.root]);
  const cluster_redirect r = parse_cluster_error(text);
  if (r.malformed) {
    ++stats.malformed_redirects;
    warn(e, fmt::format("{} answered by a malformed cluster redirect \"{}\" (expected MOVED|ASK <slot 0-16383> "
                        "<host>:<port>): kept as an error reply",
                        c.args[0], text.substr(0, 80)));
    return;
  }
  if (r.kind == cluster_reply::none) return;
  c.op.redirect = r.kind;
  c.op.slot = r.slot;
  if (r.kind != cluster_reply::moved && r.kind != cluster_reply::ask) return;
  if (r.host.empty() && e.server != nullptr) {
    // `-MOVED 3999 :6381`: an empty host means the replying node's own address.
    endpoint node = *e.server;
    node.port = r.port;
    redirect_text.clear();
    node.append_to(redirect_text);
  } else {
    redirect_text = cluster_node_text(r.host, r.port);
  }
  c.op.redirect_to = redirect_text;
  report_link(e, redirect_text);
}

void lock_recognizer::state::on_cluster(command_call& c) {
  if (c.args.size() == 2 && (iequals(c.args[1], "SLOTS") || iequals(c.args[1], "SHARDS")) &&
      c.reply.kind == reply_view::shape::array) {
    report_cluster_nodes(c.e, iequals(c.args[1], "SHARDS"));
  }
}

void lock_recognizer::state::report_link(const exchange& e, std::string_view other_node) {
  if (other_node == e.server_text) return;
  std::uint64_t h = 1469598103934665603ull;
  for (std::string_view part : {e.server_text, std::string_view("\n"), other_node}) {
    for (char ch : part) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  }
  if (links_reported.size() >= 4096) links_reported.clear();
  if (!links_reported.insert(h).second) return;
  lock_operation op;
  op.kind = lock_op_kind::cluster_link;
  op.outcome = op_outcome::ok;
  op.connection = e.connection;
  op.client = e.client;
  op.server = e.server;
  op.client_text = e.client_text;
  op.server_text = e.server_text;
  op.redirect_to = other_node;
  op.request_us = e.request_us;
  op.reply_us = e.reply_us;
  ++stats.operations;
  sink.on_operation(op);
}

// CLUSTER SLOTS: [[start, end, [ip, port, id, ...], replicas...], ...]; CLUSTER SHARDS:
// [{slots: [...], nodes: [{id, port, ip, ...}, ...]}, ...] (maps, or flat arrays in RESP2).
void lock_recognizer::state::report_cluster_nodes(const exchange& e, bool shards) {
  const message& m = *e.reply;
  const auto& nodes = m.nodes();
  const std::size_t root = m.root();
  const std::uint32_t node_depth = nodes[root].depth + (shards ? 3 : 2);
  std::string text;
  for (std::size_t i = root + 1; i < nodes.size() && nodes[i].depth > nodes[root].depth; ++i) {
    const message_node& n = nodes[i];
    if (n.depth != node_depth || !(n.type == resp::type::array || n.type == resp::type::map)) continue;
    std::string_view host;
    std::int64_t port = -1;
    if (!shards) {
      if (i + 2 < nodes.size() && nodes[i + 1].depth == node_depth + 1 && nodes[i + 2].depth == node_depth + 1 &&
          nodes[i + 2].type == resp::type::integer) {
        host = m.text(nodes[i + 1]);
        port = nodes[i + 2].integer;
      }
    } else {
      std::string_view key;
      std::size_t k = 0;
      m.for_each_child(i, [&](const message_node& child) {
        if (k++ % 2 == 0) {
          key = m.text(child);
        } else if (key == "ip") {
          host = m.text(child);
        } else if (key == "port" && child.type == resp::type::integer) {
          port = child.integer;
        }
        return true;
      });
    }
    if (port < 1 || port > 65535 || host.empty() || host == "?") continue;
    text = cluster_node_text(host, static_cast<std::uint16_t>(port));
    report_link(e, text);
  }
}

}  // namespace lockscope::locks
