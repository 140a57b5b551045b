#!/usr/bin/env bash
# The main job on the built-in default: installs, builds, then runs the synthetic tiny model
# (created on first use; random weights, so the text is meaningless) on one process and as a
# local cluster of ranks under each split, so you can see what each one does, then lets the
# planner choose a split, plans a 70B model on two Macs from the catalog, and serves the model
# over HTTP for one OpenAI-style chat request. Extra arguments
# go to every generate/run call (e.g. -n 16 -p "Hello").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
o=./build/orchard
echo "== one process"
$o generate --temp 0 -n 24 "$@"
echo "== pipeline: 2 local ranks, each holding half of the layers"
$o run --nodes 2 --parallel pipeline --temp 0 -n 24 -t 1 "$@"
echo "== tensor: 2 local ranks, each holding half of every layer"
$o run --nodes 2 --parallel tensor --temp 0 -n 24 -t 1 "$@"
echo "== hybrid: 4 local ranks, 2 pipeline stages of 2 tensor-parallel ranks"
$o run --nodes 4 --parallel hybrid --tp 2 --temp 0 -n 24 -t 1 "$@"
echo "== the planner picks the split (--parallel auto); \`orchard plan --calibrate\` sharpens it"
$o run --nodes 2 --temp 0 -n 24 "$@"
echo "== what a 70B model would do on two Mac minis (M4 Pro, 64 GB) joined by Thunderbolt 5 RDMA"
$o plan --params llama-3.3-70b --type Q4_0 --machine m4-pro:64 --nodes 2 --link tb5-rdma
echo "== serving: orchard serve answers an OpenAI-style chat request (streamed), then stops"
log=$(mktemp)
$o serve --port 0 -t 1 2>"$log" &
server=$!
trap 'kill $server 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(grep -o 'on http://127.0.0.1:[0-9]* ' "$log" | grep -o '[0-9]*[[:space:]]$' | tr -d ' ' || true)
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { cat "$log"; exit 1; }
head -1 "$log"
curl -sN "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":16,"temperature":0,"stream":true}'
kill -TERM $server && wait $server
echo "== open http://127.0.0.1:8080/ after \`./build/orchard serve\` for the chat page and the cluster view"
