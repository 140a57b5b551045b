#!/usr/bin/env bash
# End-to-end tests of `orchard serve`: starts the server on a free port with the tiny
# stories260K model, runs the Node tests against it (the official openai client, the web page
# in headless Chromium), stops the server. world.test.mjs (the coordinator's world page) starts
# its own coordinator and node agents; it runs here for the shared setup.
#
#   tests/e2e/run.sh [ORCHARD_BINARY [TEST_FILE...]]
#
# Environment: ORCHARD_BINARY (default build/orchard), ORCHARD_TEST_DATA (default tests/data in
# the repository), ORCHARD_ARTIFACTS (default e2e-artifacts beside the binary: the server log
# and the pages' screenshots), ORCHARD_CHROMIUM (default /usr/bin/chromium).
# Exit status: 0 passed, 77 skipped (no test data; CTest's SKIP_RETURN_CODE), else failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
binary=${1:-${ORCHARD_BINARY:-$here/../../build/orchard}}
shift $(($# > 0 ? 1 : 0))
tests=("$@")
((${#tests[@]})) || tests=(openai.test.mjs page.test.mjs)

source "$here/prepare.sh"

artifacts=${ORCHARD_ARTIFACTS:-$(dirname "$binary")/e2e-artifacts}
mkdir -p "$artifacts"
artifacts=$(cd "$artifacts" && pwd)
log=$artifacts/serve.log

# --port 0: the kernel picks a free port; the server names it once it listens.
# One thread: the model is tiny, and spinning workers on a shared, busy machine only slow it.
"$binary" serve -m "$model" --host 127.0.0.1 --port 0 --slots 2 -t 1 >"$log" 2>&1 &
server=$!
stop_server() {
  [[ -n ${server:-} ]] || return 0
  kill -TERM "$server" 2>/dev/null || true
  local waited=0
  while kill -0 "$server" 2>/dev/null && ((waited < 150)); do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$server" 2>/dev/null; then
    echo "e2e: the server did not stop within 15 s of SIGTERM; killing it" >&2
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
    return 1
  fi
  local rc=0
  wait "$server" || rc=$?
  server=
  if ((rc != 0)); then
    echo "e2e: the server exited with status $rc after SIGTERM" >&2
    return 1
  fi
}
trap 'stop_server || true' EXIT
trap 'exit 143' TERM INT

url=
for _ in $(seq 600); do
  url=$(grep -o 'on http://127\.0\.0\.1:[0-9]*' "$log" | head -n1 | sed 's/^on //') || true
  [[ -n $url ]] && break
  if ! kill -0 "$server" 2>/dev/null; then
    echo "e2e: the server exited before listening:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z $url ]]; then
  echo "e2e: the server did not say where it listens within 60 s:" >&2
  cat "$log" >&2
  exit 1
fi
echo "e2e: orchard serve listening at $url (log: $log)"

export ORCHARD_URL=$url ORCHARD_BINARY=$binary ORCHARD_MODEL=$model ORCHARD_ARTIFACTS=$artifacts
failed=0
for t in "${tests[@]}"; do
  echo "e2e: node --test $t"
  node --test --test-reporter=spec "$t" || failed=1
done

if ! stop_server; then
  failed=1
fi
if ((failed)); then
  echo "e2e: FAILED; the server's log ($log) ends with:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
echo "e2e: passed (artifacts, screenshots among them: $artifacts)"
