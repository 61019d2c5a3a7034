local opts = cmsgpack.unpack(ARGV[5])
local ids = cmsgpack.unpack("\146\161\51\162\49\50")
redis.call('rpush', KEYS[1], ids[1], ids[2])
local id = redis.call('rpoplpush', KEYS[1], KEYS[3])
if not id then return {0, 0} end
local lockKey = KEYS[1] .. id .. ':lock'
redis.call('set', lockKey, opts['token'], 'PX', opts['lockDuration'])
redis.call('xadd', KEYS[2], '*', 'event', 'active', 'jobId', id)
redis.call('hset', KEYS[1] .. id, 'opts', cjson.encode({attempts = 0, data = cjson.decode('{"i":[1,2]}')}))
redis.call('lrem', KEYS[3], -1, id)
return {redis.call('hmget', KEYS[1] .. id, 'opts', 'none'), cmsgpack.pack(opts, ids, {id}), redis.call('get', lockKey)}
