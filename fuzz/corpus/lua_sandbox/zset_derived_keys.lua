local weightKey, timeKey = KEYS[1] .. ":weight", string.format("%s:time", KEYS[1])
local id, now, ttl, limit, weight = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call("ZREMRANGEBYSCORE", timeKey, "-inf", now)
redis.call("ZINTERSTORE", weightKey, 2, weightKey, timeKey, "WEIGHTS", 1, 0)
redis.call("ZUNIONSTORE", KEYS[1] .. ":all", 2, weightKey, timeKey, "AGGREGATE", "MAX")
redis.call("ZDIFFSTORE", KEYS[1] .. ":stale", 1, timeKey)
if redis.call("ZSCORE", timeKey, id) then return true end
local held, count = redis.call("ZRANGE", weightKey, 0, -1, "WITHSCORES"), 0
for i = 1, #held, 2 do count = count + held[i + 1] end
if count + weight > limit then return false end
redis.call("ZADD", timeKey, now + ttl, id)
redis.call("ZADD", weightKey, weight, id)
redis.call("EXPIREAT", timeKey, redis.call("ZREVRANGE", timeKey, 0, 0, "WITHSCORES")[2] + 10)
return true
