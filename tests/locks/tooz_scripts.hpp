// OpenStack tooz 3.1's group scripts (tooz/drivers/redis.py, templates filled as its
// driver does; Debian python3-tooz): a group hash and the set of all groups, no lock.
// Test data shared by the tests of the script shadow's sets and of the recognizer.
#pragma once

#include <string>

namespace lockscope::test_texts {

inline const std::string tooz_create_group = R"(
-- Extract *all* the variables (so we can easily know what they are)...
local namespaced_group_key = KEYS[1]
local all_groups_key = KEYS[2]
local no_namespaced_group_key = ARGV[1]
if redis.call("exists", namespaced_group_key) == 1 then
    return 0
end
redis.call("sadd", all_groups_key, no_namespaced_group_key)
redis.call("hset", namespaced_group_key,
           "__created__", "1")
return 1
)";
inline const std::string tooz_delete_group = R"(
-- Extract *all* the variables (so we can easily know what they are)...
local namespaced_group_key = KEYS[1]
local all_groups_key = KEYS[2]
local no_namespaced_group_key = ARGV[1]
if redis.call("exists", namespaced_group_key) == 0 then
    return -1
end
if redis.call("sismember", all_groups_key, no_namespaced_group_key) == 0 then
    return -2
end
if redis.call("hlen", namespaced_group_key) > 1 then
    return -3
end
-- First remove from the set (then delete the group); if the set removal
-- fails, at least the group will still exist (and can be fixed manually)...
if redis.call("srem", all_groups_key, no_namespaced_group_key) == 0 then
    return -4
end
redis.call("del", namespaced_group_key)
return 1
)";

}  // namespace lockscope::test_texts
