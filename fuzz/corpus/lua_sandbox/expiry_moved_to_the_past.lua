redis.call('zadd', KEYS[2], -1, ARGV[1])
return 1
