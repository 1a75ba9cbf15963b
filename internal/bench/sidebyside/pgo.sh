#!/usr/bin/env bash
# Writes cmd/squall/default.pgo, a CPU profile that go build would use for
# profile-guided optimization of squall; measured and not adopted so far
# (docs/BENCHMARKS.md, "Build", "Profile-guided optimization";
# docs/decisions.md decision 46): run it to measure again. From the
# repository's root:
#
#   internal/bench/sidebyside/pgo.sh
#
# It runs run.sh with CPU_PROFILES over the three hot workloads of the real
# binary: the satellite's intake (CONNECTIONS connections, ROUNDS rounds of
# DURATION), the engine draining EVENTS events with the archive action
# (ENGINE_ROUNDS drains, one process each) and three masters taking
# findings inserts at the leader (ROUNDS rounds of DURATION). It merges
# each workload's profiles, then merges the three into default.pgo with
# roughly equal weights: a workload whose profile holds less CPU time is
# counted 2, 3 or 4 times (the nearest whole ratio to the largest, at most
# 4). It prints each workload's CPU time and share, and the file's size.
#
# The binary is built with -trimpath (added to GOFLAGS), so the profile
# names files by module path, not by the folder it was built in.
#
# Settings (environment): ROUNDS (3), DURATION (5s), ENGINE_ROUNDS (6),
# EVENTS, CONNECTIONS (run.sh's defaults), PROFILES (a folder for the
# profiles; default a new temporary one), PGO_OUT (the profile written;
# default cmd/squall/default.pgo). Run it on a quiet machine.
set -euo pipefail

here=./internal/bench/sidebyside
PROFILES=${PROFILES:-$(mktemp -d -t squall-pgo.XXXXXX)}
PGO_OUT=${PGO_OUT:-cmd/squall/default.pgo}
mkdir -p "$PROFILES"
echo "pgo: profiles in $PROFILES"

GOFLAGS="${GOFLAGS:-} -trimpath" CPU_PROFILES=$PROFILES PARTS="intake engine findings" ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-5s} \
	ENGINE_ROUNDS=${ENGINE_ROUNDS:-6} OUT=$PROFILES/run "$here/run.sh"

# cpu_ms PROFILE: the CPU time the profile holds, in milliseconds.
cpu_ms() {
	go tool pprof -top -nodecount=1 -unit=ms "$1" 2>/dev/null |
		sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p'
}

workloads=(intake engine findings)
go tool pprof -proto "$PROFILES"/satellite.pprof >"$PROFILES/intake.pb.gz" 2>/dev/null
go tool pprof -proto "$PROFILES"/engine-*.pprof >"$PROFILES/engine.pb.gz" 2>/dev/null
go tool pprof -proto "$PROFILES"/findings-m*.pprof >"$PROFILES/findings.pb.gz" 2>/dev/null
declare -A ms
most=0
for w in "${workloads[@]}"; do
	ms[$w]=$(cpu_ms "$PROFILES/$w.pb.gz")
	most=$(awk -v a="$most" -v b="${ms[$w]}" 'BEGIN {print (b > a ? b : a)}')
done
inputs=()
declare -A times
total=0
for w in "${workloads[@]}"; do
	times[$w]=$(awk -v m="$most" -v x="${ms[$w]}" 'BEGIN {k = int(m / x + 0.5); if (k < 1) k = 1; if (k > 4) k = 4; print k}')
	for _ in $(seq "${times[$w]}"); do inputs+=("$PROFILES/$w.pb.gz"); done
	total=$(awk -v a="$total" -v b="${ms[$w]}" -v k="${times[$w]}" 'BEGIN {print a + b * k}')
done
for w in "${workloads[@]}"; do
	awk -v w="$w" -v x="${ms[$w]}" -v k="${times[$w]}" -v t="$total" \
		'BEGIN {printf "%-9s %8.1f CPU-s in its profile, counted %d times: %4.1f%% of default.pgo\n", w, x / 1000, k, 100 * x * k / t}'
done
go tool pprof -proto "${inputs[@]}" >"$PGO_OUT" 2>/dev/null
echo "wrote $PGO_OUT: $(wc -c <"$PGO_OUT") bytes"
