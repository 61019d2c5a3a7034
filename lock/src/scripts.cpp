#include "lockscope/lock/scripts.hpp"
#include "lockscope/resp/ascii.hpp"

#include <openssl/evp.h>
#include <openssl/sha.h>

#include <array>
#include <stdexcept>
#include <cctype>

namespace lockscope::lock {

namespace {

// The SHA1s are constants so that recognising a captured EVALSHA costs no hashing;
// tests/lock checks each against OpenSSL and against redis-server's SCRIPT LOAD.
constexpr std::array<script_info, 18> table{{
    {script_kind::acquire, "acquire", scripts::acquire, "dad0f8d619e548e04f21fb48d50be5034df3adae", 1, 2},
    {script_kind::unlock, "unlock", scripts::unlock, "3ffe249c16dee540ac8ab32e39bd408626b9aff7", 2, 3},
    {script_kind::renew, "renew", scripts::renew, "8e19a1ddbdee9138df9f32a480c57addab4353d1", 1, 2},
    {script_kind::force_unlock, "force_unlock", scripts::force_unlock,
     "7e9c80b3d786b95d5d4aaf8fd73adb9775fa6fb1", 2, 1},
    {script_kind::fair_acquire, "fair_acquire", scripts::fair_acquire, "762bfafa6be221431a0b668685dd15c926483619", 3,
     4},
    {script_kind::fair_unlock, "fair_unlock", scripts::fair_unlock, "35d32367b21753c39b55dc64d1906fee627cc9a8", 4, 4},
    {script_kind::fair_force_unlock, "fair_force_unlock", scripts::fair_force_unlock,
     "95cdf4b03f82c82edf987c7d216b4b67d861b14f", 4, 2},
    {script_kind::fair_acquire_failed, "fair_acquire_failed", scripts::fair_acquire_failed,
     "d1ddef65ad80886b5d36e023c99930044ddd653a", 2, 2},
    {script_kind::fenced_acquire, "fenced_acquire", scripts::fenced_acquire,
     "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45", 2, 2},
    {script_kind::read_acquire, "read_acquire", scripts::read_acquire, "95553a6ff11176c18e71344e89d116b06fd6f753", 2, 3},
    {script_kind::read_unlock, "read_unlock", scripts::read_unlock, "f5469be4bfe5232d519471092634b3ee84e5ee6f", 4, 2},
    {script_kind::read_renew, "read_renew", scripts::read_renew, "6563941ff57e01b8cf61e86907b80686438a2f74", 2, 2},
    {script_kind::read_force_unlock, "read_force_unlock", scripts::read_force_unlock, "23f9bc91439172625235ce2ee06d6647f08a7e27", 2, 1},
    {script_kind::write_acquire, "write_acquire", scripts::write_acquire, "6306ba3bf1f563b284bed52d305fce615c6664d9", 1, 2},
    {script_kind::write_unlock, "write_unlock", scripts::write_unlock, "baa634f6184acc1b8f145e810a0e0e00967a3cbe", 2, 3},
    {script_kind::write_force_unlock, "write_force_unlock", scripts::write_force_unlock, "23639b0b2d18d26ce352e148ff4ac5b8e984b696", 2, 1},
    {script_kind::unlock_publish_argv, "unlock_publish_argv", scripts::unlock_publish_argv,
     "778cea8aada230ae060b432fc333adaec85f2f4c", 2, 4},
    {script_kind::force_unlock_publish_argv, "force_unlock_publish_argv", scripts::force_unlock_publish_argv,
     "605e338249a7a1d40df83b04f7658354f883b41b", 2, 2},
}};

static_assert(scripts::acquire.size() == 339, "seed §4.2.1 sends $339");
static_assert(scripts::unlock.size() == 305, "seed §4.2.3 sends $305");
static_assert(scripts::renew.size() == 120, "seed §4.2.2 sends $120");
static_assert(scripts::fair_acquire.size() == 1453, "seed 001's fair acquire, concatenated");
static_assert(table.size() == static_cast<std::size_t>(script_kind::force_unlock_publish_argv) + 1, "one row per kind");
static_assert([] {
  for (std::size_t i = 0; i < table.size(); ++i)
    if (static_cast<std::size_t>(table[i].kind) != i) return false;
  return true;
}(), "rows in script_kind order");


}  // namespace

std::span<const script_info> all_scripts() noexcept { return table; }

const script_info& script(script_kind kind) noexcept { return table[static_cast<std::size_t>(kind)]; }

const script_info* find_script_by_text(std::string_view text) noexcept {
  for (const script_info& s : table) {
    if (s.text == text) return &s;
  }
  return nullptr;
}

const script_info* find_script_by_sha1(std::string_view sha1) noexcept {
  for (const script_info& s : table) {
    if (resp::iequals(s.sha1, sha1)) return &s;
  }
  return nullptr;
}

namespace {
constexpr redisson_script redisson_rows[] = {
#include "redisson_catalogue.inc"
};
}  // namespace

std::span<const redisson_script> redisson_catalogue() noexcept { return redisson_rows; }

int compare_releases(std::string_view a, std::string_view b) noexcept {
  while (!a.empty() || !b.empty()) {
    auto take = [](std::string_view& s) {
      std::uint64_t v = 0;
      std::size_t i = 0;
      for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
      s.remove_prefix(i < s.size() ? i + 1 : i);
      return v;
    };
    const std::uint64_t x = take(a), y = take(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

std::vector<const redisson_script*> redisson_scripts_of(std::string_view release) {
  std::vector<const redisson_script*> out;
  for (const redisson_script& s : redisson_rows) {
    if (compare_releases(s.first_release, release) <= 0 && compare_releases(release, s.last_release) <= 0) {
      out.push_back(&s);
    }
  }
  return out;
}

std::string_view to_string(redisson_lock_type t) noexcept {
  switch (t) {
    case redisson_lock_type::lock: return "lock";
    case redisson_lock_type::fair: return "fair";
    case redisson_lock_type::read: return "read";
    case redisson_lock_type::write: return "write";
    case redisson_lock_type::spin: return "spin";
    case redisson_lock_type::fenced: return "fenced";
    case redisson_lock_type::faster_multi: return "faster_multi";
    case redisson_lock_type::non_reentrant: return "non_reentrant";
    case redisson_lock_type::non_reentrant_fair: return "non_reentrant_fair";
  }
  return "?";
}

std::string_view to_string(redisson_role r) noexcept {
  switch (r) {
    case redisson_role::acquire: return "acquire";
    case redisson_role::try_acquire: return "try_acquire";
    case redisson_role::acquire_once: return "acquire_once";
    case redisson_role::acquire_token: return "acquire_token";
    case redisson_role::unlock: return "unlock";
    case redisson_role::force_unlock: return "force_unlock";
    case redisson_role::renew: return "renew";
    case redisson_role::renew_batch: return "renew_batch";
    case redisson_role::acquire_failed: return "acquire_failed";
    case redisson_role::expire: return "expire";
    case redisson_role::query: return "query";
  }
  return "?";
}

namespace {
constexpr std::array<primitive_script_info, 12> primitive_table{{
    {primitive_script::semaphore_try_acquire, "semaphore_try_acquire", scripts::semaphore_try_acquire,
     "c7dc9d189c1715465a31a06ddbc008585e0c20be", 1, 1},
    {primitive_script::semaphore_release, "semaphore_release", scripts::semaphore_release,
     "ae27582488dd01f4e238cc0733a12146d410eb44", 2, 2},
    {primitive_script::semaphore_try_set_permits, "semaphore_try_set_permits", scripts::semaphore_try_set_permits,
     "241ce4e87e652b4f9b39d33cbcd7df9ee8ed906c", 2, 2},
    {primitive_script::semaphore_add_permits, "semaphore_add_permits", scripts::semaphore_add_permits,
     "98238d408c6755085344670d3a2ddaa55cf177a9", 2, 2},
    {primitive_script::semaphore_drain_permits, "semaphore_drain_permits", scripts::semaphore_drain_permits,
     "c87766d572855e9461c4ecd453db5d1cbab6119e", 1, 0},
    {primitive_script::latch_count_down, "latch_count_down", scripts::latch_count_down,
     "38060fab26b0e7c5982a5cfd7ad542e44d3da19b", 2, 2},
    {primitive_script::latch_try_set_count, "latch_try_set_count", scripts::latch_try_set_count,
     "2a52d54a6f35bc8af5e84a2930b2ca1aa2a15892", 2, 3},
    {primitive_script::latch_delete, "latch_delete", scripts::latch_delete, "47aed1b8133417c9bc009ffc08602e37ed4a1bb3",
     2, 2},
    {primitive_script::expirable_try_acquire, "expirable_try_acquire", scripts::expirable_try_acquire,
     "992c96b09a3d8ea0b37f5dc12e5347a44d93909d", 3, 6},
    {primitive_script::expirable_try_release, "expirable_try_release", scripts::expirable_try_release,
     "4ce079451bee2993ce00c8a4e205b536c6ccad67", 3, 4},
    {primitive_script::expirable_available_permits, "expirable_available_permits",
     scripts::expirable_available_permits, "26b3972b2c9e617556282f404cb79709d746a713", 3, 2},
    {primitive_script::expirable_add_permits, "expirable_add_permits", scripts::expirable_add_permits,
     "ec6fb1cd5f66817424e8fe70fee7929391b7c6f0", 2, 2},
}};
static_assert([] {
  for (std::size_t i = 0; i < primitive_table.size(); ++i)
    if (static_cast<std::size_t>(primitive_table[i].kind) != i) return false;
  return true;
}(), "rows in primitive_script order");
}  // namespace

std::span<const primitive_script_info> all_primitive_scripts() noexcept { return primitive_table; }
const primitive_script_info& script(primitive_script kind) noexcept {
  return primitive_table[static_cast<std::size_t>(kind)];
}

std::string sha1_hex(std::string_view bytes) {
  // Fetched once: OpenSSL 3's one-shot SHA1() looks the algorithm up on every call,
  // which costs more than hashing a lock script.
  static const EVP_MD* const sha1 = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  unsigned char digest[SHA_DIGEST_LENGTH];
  unsigned int size = 0;
  if (sha1 == nullptr || EVP_Digest(bytes.data(), bytes.size(), digest, &size, sha1, nullptr) != 1 ||
      size != SHA_DIGEST_LENGTH) {
    throw std::runtime_error("lockscope: OpenSSL cannot compute SHA1");
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(2 * SHA_DIGEST_LENGTH, '0');
  for (std::size_t i = 0; i < SHA_DIGEST_LENGTH; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 0x0f];
  }
  return out;
}

}  // namespace lockscope::lock
