#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into $FUZZ_BUILD_DIR (build-fuzz/; the
# test suite passes its sanitizer build, which holds them) and fuzzes the GGUF
# reader for SECONDS (default 60), then the rank handshake, the hostfile parser, cluster
# announcements, the planner's
# cluster files, the chat-template interpreter, HTTP request bodies and node registrations (with
# the wire protocol's other readers) for a third of that each, starting from a
# scratch copy of fuzz/corpus so the checked-in seeds stay small. Crash inputs land in
# build-fuzz/artifacts/; the exit status is non-zero on any crash, leak or sanitizer report.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DORCHARD_FUZZ=ON "${launcher[@]}" >/dev/null
cmake --build "$build" --target gguf_fuzz handshake_fuzz hostfile_fuzz announcement_fuzz cluster_fuzz chat_template_fuzz request_fuzz node_register_fuzz http_request_fuzz -j "${FUZZ_JOBS:-$(nproc)}"

run_corpus=fuzz/corpus-run/gguf
mkdir -p "$run_corpus" "$build/artifacts"
cp -n fuzz/corpus/* "$run_corpus"/ 2>/dev/null || true

# halt_on_error makes UBSan findings fatal, as ASan's already are.
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  "$build/fuzz/gguf_fuzz" "$run_corpus" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 \
  -artifact_prefix="$build/artifacts/" -print_final_stats=1

# The rank handshake (what a stranger's bytes reach), hostfiles, cluster files, chat templates
# (from model files), request bodies, node registrations and HTTP requests as the coordinator
# reads them, a third of the time each.
short=$(( seconds / 3 > 5 ? seconds / 3 : 5 ))
for target in handshake hostfile announcement cluster chat_template request node_register http_request; do
  dir=fuzz/corpus-run/$target
  mkdir -p "$dir"
  [[ -d fuzz/corpus-$target ]] && cp -n fuzz/corpus-$target/* "$dir"/ 2>/dev/null || true
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    "$build/fuzz/${target}_fuzz" "$dir" -max_total_time="$short" -max_len=4096 -rss_limit_mb=2048 \
    -artifact_prefix="$build/artifacts/" -print_final_stats=1
done
