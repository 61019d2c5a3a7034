#!/usr/bin/env bash
# Re-records a recording and its truth log: 3 processes of a lock client contending on
# two locks against a redis-server on a free loopback port, captured by tcpdump from
# before the clients connect. Each process logs what it did itself (the worker); the
# test (test_effect_recorded.cpp) compares lockscope's events with those logs.
#
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_semaphore   # mutex_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR simple_redis_mutex # srm_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_semaphore_sem # semaphore_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_lock         # redis_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR warlock            # warlock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR ioredfour          # ioredfour_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redlock_universal  # redlock_universal_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR ioredis_lock       # ioredis_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR sesame_redlock     # sesame_redlock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR sesame_redlock_mux # the same, 2 tasks a process
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR sesame_redlock_mux_short # task b's holds short
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR node_redisson      # node_redisson_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_promise_lock # redis_promise_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_kit_lock     # redis_kit_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR medusa_lock        # medusa_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR ioredis_mutex      # ioredis_mutex_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR murlock            # murlock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_mutex        # redis_mutex_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR locco              # locco_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR node_mutex         # node_mutex_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redislock          # redislock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR node_redis_lock    # node_redis_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR distributed_lock   # distributed_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redlock_node       # redlock_node_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redlock_js         # redlock_js_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redis_leader       # redis_leader_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR verrou             # verrou_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redlock_async      # redlock_async_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR dlock              # dlock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR chat_state_redis   # chat_state_redis_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR node_resque_lock   # node_resque_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR node_resque_leader # node_resque_leader_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR bullmq_jobs        # bullmq_jobs_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR bull_jobs          # bull_jobs_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR effect_semaphore   # effect_semaphore_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR bottleneck         # bottleneck_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR nestjs_simple_lock # nestjs_simple_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR safe_redis_leader  # safe_redis_leader_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR safe_redis_leader_demoted # leaders demoted, polling again
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR nest_common_lock   # nest_common_lock_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR nest_common_lock_mux # the same, 3 calls at once a connection
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redlock4           # redlock4_worker.js
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR redlock4_quorum    # the same over 3 servers
#   tests/locks/effect_clients/record.sh NODE_MODULES_DIR hoangducnhuan_redlock # hoangducnhuan_redlock_worker.js
#   tests/locks/effect_clients/record.sh - laravel_lock                      # laravel_lock_worker.php (PHP)
#   tests/locks/effect_clients/record.sh - symfony_lock                      # symfony_lock_worker.php (PHP)
#   tests/locks/effect_clients/record.sh - malkusch_mutex                    # malkusch_lock_worker.php (PHP, one server)
#   tests/locks/effect_clients/record.sh - malkusch_redlock                  # malkusch_lock_worker.php (PHP, three servers)
#   tests/locks/effect_clients/record.sh - portalocker                       # portalocker_worker.py (Python)
#   tests/locks/effect_clients/record.sh - tooz                              # tooz_worker.py (Python)
#   tests/locks/effect_clients/record.sh - rq                                # rq_worker.py (Python)
#   tests/locks/effect_clients/record.sh - kombu_mutex                       # kombu_mutex_worker.py (Python)
#   tests/locks/effect_clients/record.sh - limits                            # limits_worker.py (Python, no lock)
#   tests/locks/effect_clients/record.sh - beaker_lock                       # beaker_lock_worker.py (Python)
#   tests/locks/effect_clients/record.sh - redis_functions                   # redis_functions_worker.py (Python)
#   tests/locks/effect_clients/record.sh - laravel_funnel                    # laravel_funnel_worker.php (PHP)
#   tests/locks/effect_clients/record.sh - symfony_semaphore                 # symfony_semaphore_worker.php (PHP)
#   tests/locks/effect_clients/record.sh - dogpile_cache                     # dogpile_cache_worker.py (Python)
#   tests/locks/effect_clients/record.sh - keyspace_key                      # keyspace_worker.py, SUBSCRIBE __keyspace@2__:<lock> a wait
#   tests/locks/effect_clients/record.sh - keyspace_event                    # keyspace_worker.py, __keyevent@2__:del/expired a process
#
# NODE_MODULES_DIR holds the clients, e.g. made by
#   npm install --prefix /tmp/effect_npm redis-semaphore@5.8.0 ioredis@5 simple-redis-mutex@3.0.0 redis@5
#   npm install --prefix /tmp/effect_npm4 --legacy-peer-deps redis-lock@1.0.0 node-redis-warlock@1.0.2 \
#     ioredfour@1.4.3 redis@4 ioredis@5
#   npm install --prefix /tmp/heldout_npm redlock-universal@0.8.5 ioredis@5   # held out
#   npm install --prefix /tmp/heldout_npm4 ioredis-lock@4.0.0 ioredis@4       # held out
#   npm install --prefix /tmp/heldout2_npm @sesamecare-oss/redlock@1.4.0 node-redisson@1.0.4 ioredis@5  # held out
#   npm install --prefix /tmp/heldout5_npm @redis-kit/lock@0.1.0-3 redis-promise-lock@1.0.4 redis@5  # held out (third set)
#   npm install --prefix /tmp/heldout7_npm --legacy-peer-deps ioredis-mutex@1.0.0 @medusajs/locking-redis@2.21.2  # held out (fourth set)
#   npm install --prefix /tmp/heldout9_npm --legacy-peer-deps murlock@4.4.0 redis@4   # held out (fifth set)
#   npm install --prefix /tmp/heldout9_npm3 redis-mutex@2.0.1 redis@3                 # held out (fifth set)
#   npm install --prefix /tmp/heldout10_npm --legacy-peer-deps @kontsedal/locco@0.1.0 node-mutex@0.2.2 ioredis@5  # held out (sixth set; node-mutex brings redis@2)
#   npm install --prefix /tmp/heldout11_npm redislock@1.3.0 node-redis-lock@1.0.1 redis@2  # held out (seventh set)
#   npm install --prefix /tmp/heldout12_npm distributed-lock@1.0.5 redlock-node@2.1.4 redis@3  # held out (eighth set; distributed-lock brings ioredis@2.5)
#   npm install --prefix /tmp/heldout13_npm redlock-js@1.1.2 redis-leader@0.1.0 ioredis@5  # held out (ninth set)
#   npm install --prefix /tmp/heldout15_npm @verrou/core@0.5.2 redlock-async@3.1.2-fix.2 ioredis@5  # held out (eleventh set)
#   npm install --prefix /tmp/heldout14_npm dlock@12.1.1 ioredis@4                  # held out (tenth set; brings ioredis-lock 4.0.0)
#   npm install --prefix /tmp/heldout14_chat @chat-adapter/state-redis@4.41.1       # held out (tenth set; brings chat and redis 5)
#   npm install --prefix /tmp/heldout16_npm node-resque@9.7.1 ioredis@5             # held out (sixteenth set)
#   npm install --prefix /tmp/heldout17_npm bullmq@6.7.0 ioredis@5                  # held out (seventeenth set)
#   npm install --prefix /tmp/heldout19_npm bull@4.16.5 ioredis@5                    # held out (nineteenth set)
#   npm install --prefix /tmp/heldout20_npm effect-distributed-lock@0.0.11 ioredis@5  # held out (twentieth set; brings effect 3)
#   npm install --prefix /tmp/heldout22_npm bottleneck@2.19.5 ioredis@5              # held out (twenty-second set)
#   npm install --prefix /tmp/heldout21_npm bull-redlock@2.2.1 ioredis@5        # held out (twenty-first set)
#   npm install --prefix /tmp/heldout24_npm --legacy-peer-deps @huangang/nestjs-simple-redis-lock@0.7.1 \
#     @nestjs/common@10 reflect-metadata@0.2 ioredis@5                           # held out (twenty-fourth set)
#   npm install --prefix /tmp/heldout25_npm safe-redis-leader@0.0.6 ioredis@5        # held out (twenty-fifth set)
#   npm install --prefix /tmp/heldout26_npm --legacy-peer-deps @meta-1/nest-common@0.0.39 \
#     @nestjs/common@11 rxjs@7 reflect-metadata@0.2 lodash@4 ioredis@5            # held out (twenty-sixth set)
#   npm install --prefix /tmp/heldout27_npm redlock@4.2.0 redis@3                    # held out (twenty-seventh set)
#   npm install --prefix /tmp/heldout27_v5 @hoangducnhuan/redlock@6.0.0 redis@4      # held out (twenty-seventh set)
# laravel_lock and symfony_lock run PHP, not node (the first argument is unused), on Debian's packages:
#   apt-get install php-cli php-illuminate-cache php-illuminate-redis php-symfony-lock php-predis  # held out (twelfth set)
#   apt-get install php-cli php-malkusch-lock php-predis php-redis        # held out (eighteenth set)
#   apt-get install php-cli php-illuminate-redis php-symfony-semaphore php-predis  # held out (twenty-eighth set)
# portalocker runs Debian's Python (/usr/bin/python3) with its packages:
#   apt-get install python3-portalocker python3-redis                    # held out (thirteenth set)
#   apt-get install python3-tooz python3-rq python3-redis                # held out (fourteenth set)
#   apt-get install python3-kombu python3-limits python3-redis           # held out (fifteenth set)
#   apt-get install python3-beaker python3-redis                         # held out (twenty-third set)
#   apt-get install python3-redis redis-server                           # redis_functions (Redis 7's Functions)
#   apt-get install python3-dogpile.cache python3-redis                  # held out (twenty-eighth set)
# (redis-lock asks for node-redis 4, ioredis-lock for ioredis 4). redlock_universal,
# ioredis_lock, sesame_redlock and node_redisson are held out: clients never used while building the recognizer, measured
# as a user would meet them (measure.py). The newer recordings (redis_lock, warlock,
# ioredfour, and the held-out ones) also keep NAME.midstream.pcap: a second tcpdump started MIDSTREAM_S (1.5) s
# after the clients' first event, as a user joins a busy system; its start is the truth's midstream_start_us.
# Needs redis-server, tcpdump (root or CAP_NET_RAW) and node (php for a .php worker, Debian's python3 for a .py one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
modules=${1:?usage: record.sh NODE_MODULES_DIR redis_semaphore|simple_redis_mutex|redis_semaphore_sem|redis_lock|warlock|ioredfour|redlock_universal|ioredis_lock|sesame_redlock|sesame_redlock_mux|sesame_redlock_mux_short|node_redisson|redis_promise_lock|redis_kit_lock|medusa_lock|ioredis_mutex|murlock|redis_mutex|locco|node_mutex|redislock|node_redis_lock|distributed_lock|redlock_node|redlock_js|redis_leader|verrou|redlock_async|dlock|chat_state_redis|node_resque_lock|node_resque_leader|bullmq_jobs|bull_jobs|effect_semaphore|bottleneck|bull_redlock|bull_redlock_quorum|nestjs_simple_lock|safe_redis_leader|safe_redis_leader_demoted|nest_common_lock|nest_common_lock_mux|redlock4|redlock4_quorum|hoangducnhuan_redlock|laravel_lock|symfony_lock|malkusch_mutex|malkusch_redlock|portalocker|tooz|rq|kombu_mutex|limits|beaker_lock|redis_functions|laravel_funnel|symfony_semaphore|dogpile_cache|keyspace_key|keyspace_event}
name=${2:-redis_semaphore}
server_args=()  # redis-server's own settings, as an operator set them before the capture
case $name in
  redis_semaphore) worker=mutex_worker.js; scenario="redis-semaphore 5.8.0 Mutex" ;;
  simple_redis_mutex) worker=srm_worker.js; scenario="simple-redis-mutex 3.0.0" ;;
  redis_semaphore_sem) worker=semaphore_worker.js; scenario="redis-semaphore 5.8.0 Semaphore (2 permits)" ;;
  redis_lock) worker=redis_lock_worker.js; scenario="redis-lock 1.0.0 on node-redis 4"; rounds=24; midstream=1 ;;
  warlock) worker=warlock_worker.js; scenario="node-redis-warlock 1.0.2 on ioredis 5"; rounds=16; midstream=1 ;;
  ioredfour) worker=ioredfour_worker.js; scenario="ioredfour 1.4.3 on ioredis 5"; rounds=16; midstream=1 ;;
  redlock_universal) worker=redlock_universal_worker.js; scenario="redlock-universal 0.8.5 on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  ioredis_lock) worker=ioredis_lock_worker.js; scenario="ioredis-lock 4.0.0 on ioredis 4 (held out)"; rounds=24; midstream=1 ;;
  sesame_redlock) worker=sesame_redlock_worker.js; scenario="@sesamecare-oss/redlock 1.4.0 on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  # Two tasks per process over its one connection: task b holds stock while task a polls orders.
  sesame_redlock_mux) worker=sesame_redlock_worker.js; scenario="@sesamecare-oss/redlock 1.4.0 on ioredis 5, 2 tasks a connection (held out)"; rounds=16; midstream=1; export TASKS=2 ;;
  # The same with task b's holds shorter than task a's spacing.
  sesame_redlock_mux_short) worker=sesame_redlock_worker.js; scenario="@sesamecare-oss/redlock 1.4.0 on ioredis 5, 2 tasks a connection, short holds of stock (held out)"; rounds=16; midstream=1; export TASKS=2 SHORT_B=1 ;;
  node_redisson) worker=node_redisson_worker.js; scenario="node-redisson 1.0.4 on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  redis_promise_lock) worker=redis_promise_lock_worker.js; scenario="redis-promise-lock 1.0.4 on node-redis 5 (held out)"; rounds=24; midstream=1 ;;
  redis_kit_lock) worker=redis_kit_lock_worker.js; scenario="@redis-kit/lock 0.1.0-3 on node-redis 5 (held out)"; rounds=24; midstream=1 ;;
  medusa_lock) worker=medusa_lock_worker.js; scenario="@medusajs/locking-redis 2.21.2 on ioredis 5 (held out)"; rounds=20; midstream=1 ;;
  ioredis_mutex) worker=ioredis_mutex_worker.js; scenario="ioredis-mutex 1.0.0 on ioredis 3 (held out)"; rounds=24; midstream=1 ;;
  murlock) worker=murlock_worker.js; scenario="murlock 4.4.0 on node-redis 4 (held out)"; rounds=24; midstream=1 ;;
  redis_mutex) worker=redis_mutex_worker.js; scenario="redis-mutex 2.0.1 on node-redis 3 (held out)"; rounds=24; midstream=1 ;;
  locco) worker=locco_worker.js; scenario="@kontsedal/locco 0.1.0 on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  node_mutex) worker=node_mutex_worker.js; scenario="node-mutex 0.2.2 on node-redis 2.8 (held out)"; rounds=24; midstream=1 ;;
  redislock) worker=redislock_worker.js; scenario="redislock 1.3.0 on node-redis 2.8 (held out)"; rounds=24; midstream=1 ;;
  node_redis_lock) worker=node_redis_lock_worker.js; scenario="node-redis-lock 1.0.1 on node-redis 2.8 (held out)"; rounds=24; midstream=1 ;;
  distributed_lock) worker=distributed_lock_worker.js; scenario="distributed-lock 1.0.5 (redis) on ioredis 2.5 (held out)"; rounds=24; midstream=1 ;;
  redlock_node) worker=redlock_node_worker.js; scenario="redlock-node 2.1.4 on node-redis 3 (held out)"; rounds=24; midstream=1 ;;
  dlock) worker=dlock_worker.js; scenario="dlock 12.1.1 (ioredis-lock 4.0.0) on ioredis 4 (held out)"; rounds=24; midstream=1 ;;
  chat_state_redis) worker=chat_state_redis_worker.js; scenario="@chat-adapter/state-redis 4.41.1 on node-redis 5 (held out)"; rounds=24; midstream=1 ;;
  redlock_js) worker=redlock_js_worker.js; scenario="redlock-js 1.1.2 on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  # Each round a candidate in a child process: leaders step down, stall past their lease or
  # are killed with SIGKILL (the key expires); followers poll, take over or give up.
  redis_leader) worker=redis_leader_worker.js; scenario="redis-leader 0.1.0 on ioredis 5, leaders killed with SIGKILL (held out)"; rounds=20; midstream=1 ;;
  verrou) worker=verrou_worker.js; scenario="@verrou/core 0.5.2 (redis store) on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  redlock_async) worker=redlock_async_worker.js; scenario="redlock-async 3.1.2-fix.2 on ioredis 5 (held out)"; rounds=24; midstream=1 ;;
  # Jobs under the JobLock plugin beside queues, workers' pings and the schedulers' leader lock.
  node_resque_lock) worker=node_resque_lock_worker.js; scenario="node-resque 9.7.1 JobLock on ioredis 5, a Queue, Worker and Scheduler a process (held out)"; rounds=24; midstream=1 ;;
  # Schedulers electing a leader, restarted as a deploy would: stopped, or killed with SIGKILL.
  node_resque_leader) worker=node_resque_leader_worker.js; scenario="node-resque 9.7.1 Scheduler leader lock on ioredis 5, leaders stopped or killed with SIGKILL (held out)"; rounds=4; midstream=1 ;;
  # Job locks of a job queue: 3 workers of 3 jobs each, renewing their locks; one worker
  # killed with SIGKILL mid-run, its jobs' locks running out and the jobs taken by another.
  bullmq_jobs) worker=bullmq_jobs_worker.js; scenario="bullmq 6.7.0 job locks on ioredis 5, 3 workers of concurrency 3, one killed with SIGKILL (held out)"; rounds=60; midstream=1 ;;
  # The same shape from BullMQ's predecessor, its own scripts (the lock key in KEYS for renewals).
  bull_jobs) worker=bull_jobs_worker.js; scenario="bull 4.16.5 job locks on ioredis 5, 3 queues of concurrency 3, one killed with SIGKILL (held out)"; rounds=60; midstream=1 ;;
  # Two sorted-set semaphores (1 and 2 permits) scored by the client's clock, waits woken by
  # pub/sub beside polling; two holders killed with SIGKILL (their permits run out).
  effect_semaphore) worker=effect_semaphore_worker.js; scenario="effect-distributed-lock 0.0.11 (Redis backing) on ioredis 5, semaphores of 1 and 2 permits, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # A concurrency limiter, no lock key: jobs counted in a hash by its scripts (limits of 1
  # and 2), woken by pub/sub, queued jobs dropped after a patience; two killed with SIGKILL.
  bottleneck) worker=bottleneck_worker.js; scenario="bottleneck 2.19.5 clustered on ioredis 5, limiters of 1 and 2 running jobs, jobs killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # A Redlock fork's retry loop for acquires and extends alike, each refusal followed by its
  # unlock; a holder killed with SIGKILL mid-hold (its key expires); alone and as a quorum over 3 servers.
  bull_redlock) worker=bull_redlock_worker.js; scenario="bull-redlock 2.2.1 on ioredis 5, a holder killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  bull_redlock_quorum) worker=bull_redlock_worker.js; scenario="bull-redlock 2.2.1 on ioredis 5 over 3 servers, a holder killed with SIGKILL (held out)"; rounds=24; midstream=1; servers=3 ;;
  # A NestJS lock service: one value per process for every lock, waits retried at a fixed
  # interval then given up (and unlocked all the same), renewals by a bare PEXPIRE, holders
  # killed with SIGKILL.
  nestjs_simple_lock) worker=nestjs_simple_lock_worker.js; scenario="@huangang/nestjs-simple-redis-lock 0.7.1 on ioredis 5, outside Nest, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # Leader election by two Lua scripts (renew: GET then PEXPIRE; stop: GET then DEL) over
  # SET NX PX polls, one candidate a lock reused every round; holders killed with SIGKILL.
  safe_redis_leader) worker=safe_redis_leader_worker.js; scenario="safe-redis-leader 0.0.6 on ioredis 5, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # The same, one round in three stalled past its lease and held on: its renewal refused, the
  # library polls again by itself.
  safe_redis_leader_demoted) worker=safe_redis_leader_worker.js; scenario="safe-redis-leader 0.0.6 on ioredis 5, leaders demoted by a stall and polling again, holders killed with SIGKILL (held out)"; rounds=24; midstream=1; export DEMOTE=1 ;;
  # A NestJS decorator's lock: SET NX PX polls until a deadline, a fresh value per call, a
  # watchdog renewing by script every half lease, holders stalled past their lease or killed with SIGKILL.
  nest_common_lock) worker=nest_common_lock_worker.js; scenario="@meta-1/nest-common 0.0.39 WithLock on ioredis 5, outside Nest, holders stalled or killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # The same with 3 decorated calls at once over each process's one connection, a uuid each.
  nest_common_lock_mux) worker=nest_common_lock_worker.js; scenario="@meta-1/nest-common 0.0.39 WithLock on ioredis 5, outside Nest, 3 calls at once a connection, holders stalled or killed with SIGKILL (held out)"; rounds=36; midstream=1; export TASKS=3 ;;
  # node-redlock's own multi-key scripts as EVALSHA (unseen SHA1s, EVAL text once per
  # server), each refusal followed by its release, extends retried alike; a holder killed
  # with SIGKILL mid-hold (its key expires); alone and as a quorum over 3 servers.
  redlock4) worker=redlock4_worker.js; scenario="redlock 4.2.0 on node-redis 3, a holder killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  redlock4_quorum) worker=redlock4_worker.js; scenario="redlock 4.2.0 on node-redis 3 over 3 servers, a holder killed with SIGKILL (held out)"; rounds=24; midstream=1; servers=3 ;;
  # node-redlock 5's scripts (SHA1s built in) on node-redis 4: no clean-up after a refusal
  # but one after the last, holds extended by the library's own timer, a holder killed.
  hoangducnhuan_redlock) worker=hoangducnhuan_redlock_worker.js; scenario="@hoangducnhuan/redlock 6.0.0 on node-redis 4, a holder killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  laravel_lock) worker=laravel_lock_worker.php; scenario="Laravel illuminate/cache 8.83 RedisLock (Debian) on predis, outside the framework (held out)"; rounds=24; midstream=1 ;;
  symfony_lock) worker=symfony_lock_worker.php; scenario="symfony/lock 5.4 RedisStore (Debian) on predis, outside the framework (held out)"; rounds=24; midstream=1 ;;
  # Holders killed with SIGKILL mid-hold (their keys expire); a Redlock quorum over 3 servers.
  malkusch_mutex) worker=malkusch_lock_worker.php; scenario="malkusch/lock 2.2.1 PredisMutex (Debian) on predis, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  malkusch_redlock) worker=malkusch_lock_worker.php; scenario="malkusch/lock 2.2.1 PHPRedisMutex (Debian) on phpredis over 3 servers, holders killed with SIGKILL (held out)"; rounds=24; midstream=1; servers=3 ;;
  # A lock held by a pub/sub subscription, not a key (PUBSUB NUMSUB, SUBSCRIBE, UNSUBSCRIBE).
  portalocker) worker=portalocker_worker.py; scenario="portalocker 2.2.1 RedisLock (Debian) on redis-py 4.3 (held out)"; rounds=24; midstream=1 ;;
  # Locks inside larger jobs: a coordinator's heart, group membership and a leader election
  # (tooz); queues, jobs, registries and burst workers around a scheduler's locks (rq).
  tooz) worker=tooz_worker.py; scenario="OpenStack tooz 3.1.0 redis driver (Debian) on redis-py 4.3, group membership and leader election beside the locks (held out)"; rounds=24; midstream=1 ;;
  rq) worker=rq_worker.py; scenario="RQ 1.13.0 scheduler locks (Debian) on redis-py 4.3, jobs, registries and burst workers beside the locks (held out)"; rounds=16; midstream=1 ;;
  # Celery's unacked_mutex and a second mutex beside a producer and a consumer on one queue.
  kombu_mutex) worker=kombu_mutex_worker.py; scenario="kombu 5.2.4 redis transport Mutex (Debian) on redis-py 4.3, a producer and a consumer beside it (held out)"; rounds=24; midstream=1 ;;
  # A negative control: rate limiters, no lock at all.
  limits) worker=limits_worker.py; scenario="limits 2.8.0 RedisStorage moving and fixed windows (Debian) on redis-py 4.3, no lock (held out)"; rounds=24; midstream=1 ;;
  # A cache's creation lock released by an optimistic transaction (WATCH, GET, DEL, MULTI,
  # EXEC), no script; waits that poll until they get it, single tries; holders killed with SIGKILL.
  beaker_lock) worker=beaker_lock_worker.py; scenario="Beaker 1.11 RedisSynchronizer (Debian) on redis-py 4.3, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # Locks as Redis Functions: two libraries loaded by FUNCTION LOAD (positional and table
  # registration, 1/0 and 0/-errno answers), FCALL and FCALL_RO; holders killed with SIGKILL.
  redis_functions) worker=redis_functions_worker.py; scenario="Redis 7 Functions (FUNCTION LOAD, FCALL, FCALL_RO) by redis-py 4.3 (Debian), two libraries, holders killed with SIGKILL"; rounds=24; midstream=1 ;;
  # A concurrency limiter's slots (Redis::funnel): one EVAL picks the first free of its slot
  # keys (MGET in Lua) and SETs it EX, answering the slot's name; one id per block() call
  # polled every 250 ms to a whole-second timeout; holders killed with SIGKILL.
  laravel_funnel) worker=laravel_funnel_worker.php; scenario="Laravel illuminate/redis 8.83 ConcurrencyLimiter (Redis::funnel, one slot) (Debian) on predis, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # Semaphores of 1 and 2 permits as two sorted sets whose keys the scripts build from
  # KEYS[1], scored by the client's time() in whole seconds; refreshed by ZADD; polled by
  # the caller (the library never waits); holders killed with SIGKILL.
  symfony_semaphore) worker=symfony_semaphore_worker.php; scenario="symfony/semaphore 5.4 RedisStore (Debian) on predis, semaphores of 1 and 2 permits, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # A cache's regeneration lock (redis-py's Lock) amid the cache's own GETs and SETEXs:
  # blocking waits without a value, single tries with a stale one; holders killed with SIGKILL.
  dogpile_cache) worker=dogpile_cache_worker.py; scenario="dogpile.cache 1.1.8 Redis backend, distributed_lock (Debian) on redis-py 4.3, holders killed with SIGKILL (held out)"; rounds=24; midstream=1 ;;
  # Waiters woken by keyspace notifications (set by the operator before the capture: the
  # server starts with notify-keyspace-events), per wait on the key's channel or per process
  # on the del/expired event channels; holders killed with SIGKILL.
  keyspace_key) worker=keyspace_worker.py; scenario="SET NX PX lock on redis-py 4.3 (Debian), waiters SUBSCRIBE __keyspace@2__:<lock> per wait, holders killed with SIGKILL"; rounds=36; midstream=1; server_args=(--notify-keyspace-events KEA); export WAIT=key ;;
  keyspace_event) worker=keyspace_worker.py; scenario="SET NX PX lock on redis-py 4.3 (Debian), waiters on __keyevent@2__:del and :expired, one subscription a process, holders killed with SIGKILL"; rounds=36; midstream=1; server_args=(--notify-keyspace-events KEA); export WAIT=event ;;
  *) echo "record.sh: unknown recording $name" >&2; exit 2 ;;
esac
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# One redis-server, or ${servers} of them (a Redlock's): port holds their ports, comma-separated.
ports=() filter="" server_list=""
for n in $(seq "${servers:-1}"); do
  p=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$work/s$n"
  redis-server --port "$p" --bind 127.0.0.1 --protected-mode no --save '' --appendonly no --dir "$work/s$n" "${server_args[@]}" >"$work/redis$n.log" 2>&1 &
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
  ports+=("$p") filter+="${filter:+ or }tcp port $p" server_list+="${server_list:+,}\"127.0.0.1:$p\""
done
port=$(IFS=,; echo "${ports[*]}")
tcpdump -i lo -U -s 0 -w "$work/capture.pcap" "$filter" 2>"$work/tcpdump.log" &
dump=$!
sleep 1
start_us=$(date +%s%6N)
pids=()
for p in p1 p2 p3; do
  case $worker in
    *.php) php "$here/$worker" "$port" "$p" "${rounds:-8}" >"$work/$p.jsonl" & ;;
    *.py) /usr/bin/python3 "$here/$worker" "$port" "$p" "${rounds:-8}" >"$work/$p.jsonl" & ;;
    *) NODE_PATH="$modules" node "$here/$worker" "$port" "$p" "${rounds:-8}" >"$work/$p.jsonl" & ;;
  esac
  pids+=($!)
done
mid_field=""
if [[ ${midstream:-0} == 1 ]]; then
  # From the clients' first logged event: node's start-up takes seconds on a busy machine.
  for _ in $(seq 300); do [[ -n $(cat "$work"/p*.jsonl 2>/dev/null) ]] && break; sleep 0.05; done
  sleep "${MIDSTREAM_S:-1.5}"
  mid_us=$(date +%s%6N)
  tcpdump -i lo -U -s 0 -w "$work/midstream.pcap" "$filter" 2>"$work/tcpdump_mid.log" &
  mid_dump=$!
  mid_field=",\"midstream_start_us\":$mid_us"
fi
for pid in "${pids[@]}"; do wait "$pid"; done
stop_us=$(date +%s%6N)
sleep 2  # let tcpdump drain what the kernel holds (a loaded machine lags)
kill -INT "$dump"; wait "$dump" || true
if [[ -n ${mid_dump:-} ]]; then kill -INT "$mid_dump"; wait "$mid_dump" || true; cp "$work/midstream.pcap" "$here/$name.midstream.pcap"; fi
{
  echo "{\"event\":\"recording\",\"scenario\":\"$scenario\",\"capture_start_us\":$start_us,\"capture_stop_us\":$stop_us$mid_field,\"servers\":[$server_list]}"
  # A client whose processes' logs must be read together (rq_truth.py) has NAME_truth.py.
  if [[ -f $here/${name}_truth.py ]]; then
    cat "$work"/p*.jsonl | python3 "$here/merge_truth.py" | python3 "$here/${name}_truth.py"
  else
    cat "$work"/p*.jsonl | python3 "$here/merge_truth.py"
  fi
} >"$here/$name.truth.jsonl"
cp "$work/capture.pcap" "$here/$name.pcap"
echo "recorded $(grep -c '"event":"acquired"' "$here/$name.truth.jsonl") acquisitions, $(stat -c %s "$here/$name.pcap") bytes"
