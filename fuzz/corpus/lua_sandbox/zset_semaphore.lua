local sem, id, permits, lease, now = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)
if redis.call('ZSCORE', sem, id) then redis.call('ZADD', sem, 'XX', now + lease, id) return 'OK' end
if redis.call('ZCARD', sem) >= permits then return false end
redis.call('ZADD', sem, now + lease, id)
redis.call('PEXPIREAT', sem, redis.call('ZREVRANGE', sem, 0, 0, 'WITHSCORES')[2])
return {redis.call('ZRANGE', sem, 0, -1, 'BYSCORE', 'REV', 'LIMIT', 0, 2), redis.call('ZCOUNT', sem, '(' .. now, '+inf')}
