local key = KEYS[1]
local token = ARGV[1]
if redis.call('get', key) == token then return redis.call('del', key) end
return 0
