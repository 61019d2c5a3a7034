// Part of lock_timeline::impl (its data: timeline_state.hpp): raw_scope's slow path, a
// scope looked up by hash or made, kept out of line (identity.hpp inlines the rest).
#include "timeline/timeline_state.hpp"

namespace lockscope::locks {

std::uint32_t lock_timeline::impl::find_scope(std::string_view server, std::int32_t db) {
  auto it = scope_by_server.find(server);
  if (it == scope_by_server.end()) it = scope_by_server.emplace(std::string(server), no_id).first;
  std::uint32_t* link = &it->second;
  for (; *link != no_id; link = &scopes[*link].next) {
    if (scopes[*link].db == db) return last_scope = *link;
  }
  *link = static_cast<std::uint32_t>(scopes.size());
  scope fresh;
  fresh.server = std::string(server);
  fresh.db = db;
  scopes.push_back(std::move(fresh));
  return last_scope = *link;
}

}  // namespace lockscope::locks
