#!lua name=api_mutex
local function mutex_lock(keys, args)
  if redis.call('SET', keys[1], args[1], 'NX', 'PX', args[2]) then return 1 end
  return 0
end
redis.register_function('mutex_lock', mutex_lock)
redis.register_function{function_name = 'mutex_unlock', callback = function(keys, args)
  local holder = redis.call('GET', keys[1])
  if not holder then return -2 end
  if holder ~= args[1] then return -16 end
  redis.call('DEL', keys[1])
  return 0
end, flags = {'no-writes'}}
