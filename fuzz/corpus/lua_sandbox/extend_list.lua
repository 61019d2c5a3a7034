if redis.call('get', KEYS[1]) ~= ARGV[1] then return {0, redis.call('pttl', KEYS[1])} end
local ttl = redis.call('pttl', KEYS[1])
if ttl < tonumber(ARGV[2]) then redis.call('pexpire', KEYS[1], ARGV[3]) end
return {1, redis.call('pttl', KEYS[1])}
