#!/usr/bin/env bash
# Runs the fuzz targets one after the other (CPU is usually shared), each for SECONDS
# (default 600), new inputs kept in a scratch corpus so the committed seeds stay small.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   Logs: $FUZZ_LOGS (default /tmp/shoal-fuzz).
# $FUZZ_BUILD_FLAGS go to `cargo fuzz run` (e.g. "-s none": no AddressSanitizer, which builds
# faster and runs about twice as many inputs; overflow checks and debug assertions stay on).
set -u
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(client_command handshake_response packet_framer router nested_expressions backend_response merge_values config)
logs=${FUZZ_LOGS:-/tmp/shoal-fuzz}
mkdir -p "$logs"
for t in "${targets[@]}"; do
  mkdir -p "$logs/corpus/$t"
  echo "== $t: $secs s"
  # shellcheck disable=SC2086
  cargo +nightly fuzz run ${FUZZ_BUILD_FLAGS:-} "$t" "$logs/corpus/$t" "fuzz/corpus/$t" -- \
    -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    >"$logs/$t.log" 2>&1
  echo "   exit $?; $(grep -E '^#[0-9]+' "$logs/$t.log" | tail -1)"
  grep -E 'stat::number_of_executed_units|SUMMARY|panicked' "$logs/$t.log" | head -5
done
