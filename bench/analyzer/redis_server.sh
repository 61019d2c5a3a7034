# Sourced by the analyzer benchmarks: a throwaway redis-server on a free loopback port.
#
#   source "$(dirname "$0")/redis_server.sh"
#   trap '...; stop_redis_server' EXIT
#   start_redis_server     # sets port, workdir (a temporary directory) and server_pid
start_redis_server() {
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  workdir=$(mktemp -d)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$workdir" \
    --logfile "$workdir/redis.log" &
  server_pid=$!
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

# Stops the server and removes workdir (safe to call when nothing was started).
stop_redis_server() {
  [[ -n "${server_pid:-}" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
  [[ -n "${workdir:-}" && -z "${KEEP_WORKDIR:-}" ]] && rm -rf "$workdir"
  server_pid=""
}
