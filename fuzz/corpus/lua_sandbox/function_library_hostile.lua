#!lua name=hostile
local s = 'x'
for i = 1, 40 do s = s .. s end
redis.register_function('spin', function(keys, args) while true do end end)
