#!/usr/bin/env bash
# A coordinator holding many nodes' long-polls while a client's chats are timed (issue 26's
# scale bar): starts `orchard network serve`, runs `orchard network load` against it, and
# prints the load's report with the coordinator's peak resident memory and thread count.
#
#   bench/coordinator_load.sh [NODES [CHATS]] [-- --db postgresql://…]
#
# Each process needs a descriptor per node (`ulimit -Hn` must allow NODES + a few hundred).
set -euo pipefail
orchard=${ORCHARD:-build/orchard}
nodes=${1:-10000}
chats=${2:-2000}
shift $(( $# > 2 ? 2 : $# ))
[[ ${1:-} == -- ]] && shift
dir=$(mktemp -d /tmp/orchard-load.XXXXXX)
stores=(--data "$dir")
[[ " $* " == *" --db "* || " $* " == *" --database "* ]] && stores=(--key "$dir/coordinator.key")
port=$((20000 + RANDOM % 20000))
key_stores=("${stores[@]}" "$@")
[[ ${stores[0]} == --key ]] && key_stores=("$@")
"$orchard" network serve "${stores[@]}" "$@" --port "$port" --no-disk-wait --audit-rate 0 --canary-rate 0 --key-rate 0 \
  >"$dir/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
key=$("$orchard" network api-key create load "${key_stores[@]}" 2>/dev/null)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
"$orchard" network load --port "$port" --api-key "$key" --nodes "$nodes" --chats "$chats"
echo "coordinator: peak resident $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' /proc/$pid/status)," \
     "$(ls /proc/$pid/task | wc -l) threads, $(nproc) cores"
