#include "lockscope/locks/lock_patterns.hpp"

#include <array>

namespace lockscope::locks {

namespace {
// Byte for byte as each client sends them (their SHA1s are what EVALSHA names), taken
// from the sources named in `origin`; see README "Recognised clients". Their SHA1s are
// checked against SHA1s computed from those sources in tests/locks/test_client_scripts.cpp.
constexpr std::array<known_script, 16> clients{{
    {"redisson unlock (publish command as ARGV, 3.22-3.23)", "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end; return nil;",
     "redisson 3.22.0-3.23.5, RedissonLock.unlockInnerAsync"},
    {"node-redlock 5.0.0-beta.2 acquire",
     "\n"
     "  -- Return 0 if an entry already exists.\n"
     "  for i, key in ipairs(KEYS) do\n"
     "    if redis.call(\"exists\", key) == 1 then\n"
     "      return 0\n"
     "    end\n"
     "  end\n"
     "\n"
     "  -- Create an entry for each provided key.\n"
     "  for i, key in ipairs(KEYS) do\n"
     "    redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n"
     "  end\n"
     "\n"
     "  -- Return the number of entries added.\n"
     "  return #KEYS\n",
     "npm redlock 5.0.0-beta.2, dist/cjs/index.js (ACQUIRE/EXTEND/RELEASE_SCRIPT)"},
    {"node-redlock 5.0.0-beta.2 extend",
     "\n"
     "  -- Return 0 if an entry exists with a *different* lock value.\n"
     "  for i, key in ipairs(KEYS) do\n"
     "    if redis.call(\"get\", key) ~= ARGV[1] then\n"
     "      return 0\n"
     "    end\n"
     "  end\n"
     "\n"
     "  -- Update the entry for each provided key.\n"
     "  for i, key in ipairs(KEYS) do\n"
     "    redis.call(\"set\", key, ARGV[1], \"PX\", ARGV[2])\n"
     "  end\n"
     "\n"
     "  -- Return the number of entries updated.\n"
     "  return #KEYS\n",
     "npm redlock 5.0.0-beta.2, dist/cjs/index.js (ACQUIRE/EXTEND/RELEASE_SCRIPT)"},
    {"node-redlock 5.0.0-beta.2 release",
     "\n"
     "  local count = 0\n"
     "  for i, key in ipairs(KEYS) do\n"
     "    -- Only remove entries for *this* lock value.\n"
     "    if redis.call(\"get\", key) == ARGV[1] then\n"
     "      redis.pcall(\"del\", key)\n"
     "      count = count + 1\n"
     "    end\n"
     "  end\n"
     "\n"
     "  -- Return the number of entries removed.\n"
     "  return count\n",
     "npm redlock 5.0.0-beta.2, dist/cjs/index.js (ACQUIRE/EXTEND/RELEASE_SCRIPT)"},
    {"redis-py 4.3 Lock release",
     "\n"
     "        local token = redis.call('get', KEYS[1])\n"
     "        if not token or token ~= ARGV[1] then\n"
     "            return 0\n"
     "        end\n"
     "        redis.call('del', KEYS[1])\n"
     "        return 1\n"
     "    ",
     "redis-py 4.3.4 (Debian python3-redis), redis/lock.py (LUA_*_SCRIPT)"},
    {"redis-py 4.3 Lock extend",
     "\n"
     "        local token = redis.call('get', KEYS[1])\n"
     "        if not token or token ~= ARGV[1] then\n"
     "            return 0\n"
     "        end\n"
     "        local expiration = redis.call('pttl', KEYS[1])\n"
     "        if not expiration then\n"
     "            expiration = 0\n"
     "        end\n"
     "        if expiration < 0 then\n"
     "            return 0\n"
     "        end\n"
     "\n"
     "        local newttl = ARGV[2]\n"
     "        if ARGV[3] == \"0\" then\n"
     "            newttl = ARGV[2] + expiration\n"
     "        end\n"
     "        redis.call('pexpire', KEYS[1], newttl)\n"
     "        return 1\n"
     "    ",
     "redis-py 4.3.4 (Debian python3-redis), redis/lock.py (LUA_*_SCRIPT)"},
    {"redis-py 4.3 Lock reacquire",
     "\n"
     "        local token = redis.call('get', KEYS[1])\n"
     "        if not token or token ~= ARGV[1] then\n"
     "            return 0\n"
     "        end\n"
     "        redis.call('pexpire', KEYS[1], ARGV[2])\n"
     "        return 1\n"
     "    ",
     "redis-py 4.3.4 (Debian python3-redis), redis/lock.py (LUA_*_SCRIPT)"},
    {"redsync v4 release",
     "\n"
     "\tlocal val = redis.call(\"GET\", KEYS[1])\n"
     "\tif val == ARGV[1] then\n"
     "\t\treturn redis.call(\"DEL\", KEYS[1])\n"
     "\telseif val == false then\n"
     "\t\treturn -1\n"
     "\telse\n"
     "\t\treturn 0\n"
     "\tend\n",
     "go-redsync/redsync v4.13.0-v4.17.0, scripts.go (SHA1s given there)"},
    {"redsync v4 extend",
     "\n"
     "\tif redis.call(\"GET\", KEYS[1]) == ARGV[1] then\n"
     "\t\treturn redis.call(\"PEXPIRE\", KEYS[1], ARGV[2])\n"
     "\telse\n"
     "\t\treturn 0\n"
     "\tend\n",
     "go-redsync/redsync v4.13.0-v4.17.0, scripts.go (SHA1s given there)"},
    {"redsync v4 extend with SET NX",
     "\n"
     "\tif redis.call(\"GET\", KEYS[1]) == ARGV[1] then\n"
     "\t\treturn redis.call(\"PEXPIRE\", KEYS[1], ARGV[2])\n"
     "\telseif redis.call(\"SET\", KEYS[1], ARGV[1], \"PX\", ARGV[2], \"NX\") then\n"
     "\t\treturn 1\n"
     "\telse\n"
     "\t\treturn 0\n"
     "\tend\n",
     "go-redsync/redsync v4.13.0-v4.17.0, scripts.go (SHA1s given there)"},
    {"redis-plus-plus RedMutex extend",
     "\n"
     "if redis.call(\"GET\",KEYS[1]) == ARGV[1] then\n"
     "  return redis.call(\"pexpire\",KEYS[1],ARGV[2])\n"
     "else\n"
     "  return 0\n"
     "end\n",
     "sewenew/redis-plus-plus 1.3.15, patterns/redlock.cpp (RedLockMutexVessel, sent with EVAL)"},
    {"redis-plus-plus RedMutex unlock",
     "\n"
     "if redis.call(\"GET\",KEYS[1]) == ARGV[1] then\n"
     "  return redis.call(\"del\",KEYS[1])\n"
     "else\n"
     "  return 0\n"
     "end\n",
     "sewenew/redis-plus-plus 1.3.15, patterns/redlock.cpp (RedLockMutexVessel, sent with EVAL)"},
    {"node-redisson 1.0.4 acquire",
     "\n"
     "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then\n"
     "  redis.call('hincrby', KEYS[1], ARGV[2], 1);\n"
     "  redis.call('pexpire', KEYS[1], ARGV[1]);\n"
     "  return nil;\n"
     "end\n"
     "return redis.call('pttl', KEYS[1]);",
     "npm node-redisson 1.0.4, dist/executor/CommandExecutor.js with the pub/sub adapter (the default)"},
    {"node-redisson 1.0.4 unlock (latch)",
     "\n"
     "local val = redis.call('get', KEYS[3]);\n"
     "if val ~= false then\n"
     "  return tonumber(val);\n"
     "end\n"
     "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then\n"
     "  return nil;\n"
     "end\n"
     "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);\n"
     "if (counter > 0) then\n"
     "  redis.call('pexpire', KEYS[1], ARGV[2]);\n"
     "  redis.call('set', KEYS[3], 0, 'px', ARGV[4]);\n"
     "  return 0;\n"
     "else\n"
     "  redis.call('del', KEYS[1]);\n"
     "  redis.call('publish', KEYS[2], ARGV[1]);\n"
     "  redis.call('set', KEYS[3], 1, 'px', ARGV[4]);\n"
     "  return 1;\n"
     "end",
     "npm node-redisson 1.0.4, dist/executor/CommandExecutor.js with the pub/sub adapter (the default)"},
    {"node-redisson 1.0.4 renew",
     "\n"
     "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \n"
     "  redis.call('pexpire', KEYS[1], ARGV[1]);\n"
     "  return 1;\n"
     "end;\n"
     "return 0;",
     "npm node-redisson 1.0.4, dist/executor/CommandExecutor.js with the pub/sub adapter (the default)"},
    {"node-redisson 1.0.4 forceUnlock",
     "\n"
     "if (redis.call('del', KEYS[1]) == 1) then \n"
     "  redis.call('publish', KEYS[2], ARGV[1]);\n"
     "  return 1\n"
     "else\n"
     "  return 0\n"
     "end",
     "npm node-redisson 1.0.4, dist/executor/CommandExecutor.js with the pub/sub adapter (the default)"},
}};
}  // namespace

std::span<const known_script> client_scripts() noexcept { return clients; }

}  // namespace lockscope::locks
