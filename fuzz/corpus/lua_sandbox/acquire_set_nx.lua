return redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
