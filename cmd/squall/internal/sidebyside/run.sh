#!/usr/bin/env bash
# Side-by-side benchmarks with real processes (docs/BENCHMARKS.md, "Side by
# side"). From the repository's root:
#
#   cmd/squall/internal/sidebyside/run.sh
#
# 1. Intake: a kfake broker in its own process; squall satellite, the plain
#    handler and the naive kafka-go handler, each loaded in turn with
#    squall bench webhook (closed loop, CONNECTIONS connections, DURATION
#    each) for ROUNDS interleaved rounds; prints each round, the medians
#    of the per-round ratios satellite/plain and satellite/naive, and the
#    satellites' records per produce request.
# 2. Engine: EVENTS events preloaded into one topic; squall engine (a master
#    serves it a tree whose rule archives every event) and the bare consumer
#    drain it in turn, each as a new consumer group from the start, for
#    ENGINE_ROUNDS interleaved rounds, measured with squall bench engine;
#    prints the drain rates, the engine's CPU per event and the median ratio.
#
# Settings (environment): ROUNDS (5), DURATION (10s), CONNECTIONS (64),
# EVENTS (200000), ENGINE_ROUNDS (3), WORKERS (the engine's --workers,
# default its own), PARTS (intake, engine or both: "intake engine"), OUT (a
# folder for the binaries, logs and JSON summaries; default a new temporary
# one). BASELINE_SQUALL names another squall binary (an older version): its
# satellite (and engine) then run as a fourth target ("before"), in the same
# rounds, for before/after figures. SATELLITE_GOGC sets GOGC for the
# satellite under test only (unset, it runs with its own default, GOGC=400,
# as users run it). PROFILE_SATELLITE=1 records a CPU profile of the satellite with perf
# during its first round (OUT/satellite.perf.data), PROFILE_ENGINE=1 the
# engine and the bare consumer during theirs (OUT/engine.perf.data,
# OUT/bareconsumer.perf.data).
# Every process it starts is stopped when it ends.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
EVENTS=${EVENTS:-200000}
ENGINE_ROUNDS=${ENGINE_ROUNDS:-3}
WORKERS=${WORKERS:-}
PARTS=${PARTS:-intake engine}
OUT=${OUT:-$(mktemp -d -t squall-sidebyside.XXXXXX)}
mkdir -p "$OUT/bin"
echo "side by side: output in $OUT; $(nproc) CPUs; load: $(uptime | sed 's/.*load average: //')"

pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT

# stop PID: SIGTERM, then wait for it.
stop() {
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	local kept=()
	for pid in "${pids[@]}"; do
		[[ $pid == "$1" ]] || kept+=("$pid")
	done
	pids=("${kept[@]}")
}

# wait_file FILE: until FILE exists and is not empty (30 s at most).
wait_file() {
	for _ in $(seq 300); do
		[[ -s $1 ]] && return 0
		sleep 0.1
	done
	echo "no $1 within 30s" >&2
	return 1
}

# log_addr LOG MSG KEY: the value of KEY in the JSON log line MSG of LOG,
# waited for (30 s at most).
log_addr() {
	local v
	for _ in $(seq 300); do
		v=$(grep -F "\"msg\":\"$2\"" "$1" 2>/dev/null | head -n1 | sed -n "s/.*\"$3\":\"\\([^\"]*\\)\".*/\\1/p")
		if [[ -n $v ]]; then
			echo "$v"
			return 0
		fi
		sleep 0.1
	done
	echo "no \"$2\" line in $1 within 30s:" >&2
	tail -n 20 "$1" >&2
	return 1
}

# field FILE NAME: the first number of "NAME": in a JSON summary.
field() { sed -n "s/^ *\"$2\": \\(-\\{0,1\\}[0-9.e+-]*\\),\\{0,1\\}$/\\1/p" "$1" | head -n1; }

# cpu PID: the CPU time (user + system) of process PID so far, in seconds.
cpu() { awk -v t="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); print ($12 + $13) / t}' "/proc/$1/stat"; }

# median: the median of the numbers on standard input.
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

here=./cmd/squall/internal/sidebyside
echo "building"
go build -o "$OUT/bin/squall" ./cmd/squall
for p in broker plain naive bareconsumer; do
	go build -o "$OUT/bin/$p" "$here/$p"
done
B=$OUT/bin

"$B/broker" --addr-file "$OUT/broker.addr" --topics squall.events,squall.events.dlq,bench.naive,bench.engine,bench.engine.dlq \
	2>"$OUT/broker.log" &
pids+=($!)
wait_file "$OUT/broker.addr"
BROKER=$(cat "$OUT/broker.addr")

if [[ " $PARTS " == *" intake "* ]]; then
	mkdir -p "$OUT/webhooks"
	cat >"$OUT/webhooks/bench.json" <<'JSON'
{"id": "bench", "token": "bench-token", "tenant_id": "bench",
 "collector_config": {"event_type": "bench", "payload": {"body": "${@}"}}}
JSON
	sat_env=()
	[[ -z ${SATELLITE_GOGC:-} ]] || sat_env=("GOGC=$SATELLITE_GOGC")
	env "${sat_env[@]}" "$B/squall" satellite --http 127.0.0.1:0 --name bench --webhooks-dir "$OUT/webhooks" \
		--kafka-brokers "$BROKER" --spool-dir "$OUT/spool" 2>"$OUT/satellite.log" &
	sat_pid=$!
	pids+=("$sat_pid")
	"$B/plain" --addr-file "$OUT/plain.addr" 2>"$OUT/plain.log" &
	plain_pid=$!
	pids+=("$plain_pid")
	"$B/naive" --addr-file "$OUT/naive.addr" --kafka-brokers "$BROKER" --topic bench.naive 2>"$OUT/naive.log" &
	naive_pid=$!
	pids+=("$naive_pid")
	declare -A pid_of=([satellite]=$sat_pid [plain]=$plain_pid [naive]=$naive_pid)
	targets=(satellite plain naive)
	if [[ -n ${BASELINE_SQUALL:-} ]]; then
		"$BASELINE_SQUALL" satellite --http 127.0.0.1:0 --name bench-before --webhooks-dir "$OUT/webhooks" \
			--kafka-brokers "$BROKER" --spool-dir "$OUT/spool-before" 2>"$OUT/before.log" &
		pid_of[before]=$!
		pids+=("${pid_of[before]}")
		targets+=(before)
	fi
	SAT=$(log_addr "$OUT/satellite.log" "satellite started" http)
	wait_file "$OUT/plain.addr"
	wait_file "$OUT/naive.addr"
	declare -A url=(
		[satellite]="http://$SAT/engine/webhook/event/bench?token=bench-token"
		[plain]="http://$(cat "$OUT/plain.addr")/"
		[naive]="http://$(cat "$OUT/naive.addr")/"
	)
	if [[ -n ${BASELINE_SQUALL:-} ]]; then
		url[before]="http://$(log_addr "$OUT/before.log" "satellite started" http)/engine/webhook/event/bench?token=bench-token"
	fi
	body=$OUT/body.json
	printf '%s' '{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}' >"$body"
	echo
	echo "intake: $ROUNDS rounds of $DURATION per target, $CONNECTIONS connections, 106-byte body"
	echo "(cpu-us/req: the target's process CPU per answer; broker-us/req: the broker's, in the same round)"
	printf '%-6s %-10s %10s %9s %9s %7s %11s %13s\n' round target req/s p50-ms p99-ms non2xx cpu-us/req broker-us/req
	for r in $(seq "$ROUNDS"); do
		for t in "${targets[@]}"; do
			f=$OUT/intake-$r-$t.json
			if [[ $t == satellite && $r == 1 && ${PROFILE_SATELLITE:-} == 1 ]]; then
				perf record -F 499 -g -p "$sat_pid" -o "$OUT/satellite.perf.data" -- sleep "${DURATION%s}" >/dev/null 2>&1 &
				perf_pid=$!
			fi
			c0=$(cpu "${pid_of[$t]}") b0=$(cpu "${pids[0]}")
			"$B/squall" bench webhook --url "${url[$t]}" --connections "$CONNECTIONS" --duration "$DURATION" \
				--body-file "$body" --json >"$f" 2>"$OUT/intake-$r-$t.progress"
			c1=$(cpu "${pid_of[$t]}") b1=$(cpu "${pids[0]}")
			answered=$(field "$f" answered)
			awk -v a="$c0" -v b="$c1" -v n="$answered" 'BEGIN {print (b-a)*1e6/n}' >"$OUT/intake-$r-$t.cpu"
			awk -v a="$b0" -v b="$b1" -v n="$answered" 'BEGIN {print (b-a)*1e6/n}' >"$OUT/intake-$r-$t.brokercpu"
			if [[ -n ${perf_pid:-} ]]; then
				wait "$perf_pid" || true
				perf_pid=
			fi
			printf '%-6s %-10s %10.0f %9.2f %9.2f %7s %11.1f %13.1f\n' "$r" "$t" "$(field "$f" throughput)" "$(field "$f" p50)" \
				"$(field "$f" p99)" "$(field "$f" non_2xx)" "$(cat "$OUT/intake-$r-$t.cpu")" "$(cat "$OUT/intake-$r-$t.brokercpu")"
		done
	done
	for r in $(seq "$ROUNDS"); do
		s=$OUT/intake-$r-satellite.json p=$OUT/intake-$r-plain.json n=$OUT/intake-$r-naive.json
		awk -v s="$(field "$s" throughput)" -v p="$(field "$p" throughput)" 'BEGIN {print s/p}' >>"$OUT/ratio-plain"
		awk -v s="$(field "$s" throughput)" -v n="$(field "$n" throughput)" 'BEGIN {print s/n}' >>"$OUT/ratio-naive"
		awk -v s="$(field "$s" p99)" -v p="$(field "$p" p99)" 'BEGIN {print s/p}' >>"$OUT/ratio-p99-plain"
		awk -v s="$(field "$s" p99)" -v n="$(field "$n" p99)" 'BEGIN {print s/n}' >>"$OUT/ratio-p99-naive"
		if [[ -n ${BASELINE_SQUALL:-} ]]; then
			awk -v s="$(field "$s" throughput)" -v b="$(field "$OUT/intake-$r-before.json" throughput)" 'BEGIN {print s/b}' >>"$OUT/ratio-before"
			awk -v s="$(field "$s" p99)" -v b="$(field "$OUT/intake-$r-before.json" p99)" 'BEGIN {print s/b}' >>"$OUT/ratio-p99-before"
		fi
		for t in "${targets[@]}"; do
			awk -v c="$(cat "$OUT/intake-$r-$t.cpu")" -v b="$(cat "$OUT/intake-$r-$t.brokercpu")" 'BEGIN {print c+b}' >>"$OUT/cpu-$t"
		done
	done
	echo "median of the rounds' ratios: satellite/plain req/s $(median <"$OUT/ratio-plain")," \
		"p99 $(median <"$OUT/ratio-p99-plain"); satellite/naive req/s $(median <"$OUT/ratio-naive"), p99 $(median <"$OUT/ratio-p99-naive")"
	echo "median CPU per request, the target and the broker together (us): satellite $(median <"$OUT/cpu-satellite")," \
		"plain $(median <"$OUT/cpu-plain"), naive $(median <"$OUT/cpu-naive")"
	# records_per_request URL: records per produce request of the satellite
	# serving URL, from its kafka metrics (all rounds together).
	records_per_request() {
		curl -fsS "$1/metrics" | awk '/^squall_kafka_batch_records_sum /{s=$2} /^squall_kafka_batch_records_count /{c=$2}
			END {if (c > 0) printf "%.1f", s/c; else print "nan"}'
	}
	batches="satellite $(records_per_request "http://$SAT")"
	if [[ -n ${BASELINE_SQUALL:-} ]]; then
		echo "before: satellite/before req/s $(median <"$OUT/ratio-before"), p99 $(median <"$OUT/ratio-p99-before");" \
			"CPU per request before $(median <"$OUT/cpu-before") us"
		batches+=", before $(records_per_request "${url[before]%%/engine/*}")"
		stop "${pid_of[before]}"
	fi
	echo "records per produce request (all rounds): $batches"
	stop "$sat_pid"
fi

if [[ " $PARTS " == *" engine "* ]]; then
	"$B/squall" master --node-id m1 --data-dir "$OUT/master" --http 127.0.0.1:0 --raft 127.0.0.1:0 --bootstrap \
		--allow-unsigned-tokens 2>"$OUT/master.log" &
	pids+=($!)
	MASTER=http://$(log_addr "$OUT/master.log" "master started" http_addr)
	"$B/squall" token --user bench --auth all=root:admin --unsigned >"$OUT/token"
	TOKEN=$(cat "$OUT/token")
	for _ in $(seq 300); do
		curl -fsS -o /dev/null "$MASTER/readyz" 2>/dev/null && break
		sleep 0.1
	done
	api() { curl -fsS -H "Authorization: Bearer $TOKEN" "$@"; }
	draft=$(api -X POST "$MASTER/api/v2_beta/config/drafts/all" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
	api -X PUT -F "file=@$here/engine-tree.json" "$MASTER/api/v2_beta/config/draft/tree/import/all/$draft/root" >/dev/null
	api -X POST "$MASTER/api/v2_beta/config/drafts/all/$draft/deploy" >/dev/null
	printf '{"archive": {"base_path": "%s", "default_path": "/all.log", "paths": {"bench": "/bench.log"}}}\n' \
		"$OUT/archive" >"$OUT/actions.json"

	echo
	echo "engine: $EVENTS events ($here/event.json, 1 KB) preloaded into bench.engine (6 partitions)"
	"$B/squall" bench engine --kafka-brokers "$BROKER" --topic bench.engine --events "$EVENTS" \
		--body-file "$here/event.json" --json >"$OUT/preload.json" 2>"$OUT/preload.progress"
	echo "preloaded $(field "$OUT/preload.json" produced) events at $(field "$OUT/preload.json" produce_rate | cut -d. -f1)/s"
	printf '%-6s %-14s %12s %14s %12s\n' round consumer events/s cpu-us/event max-rss-MiB
	for r in $(seq "$ENGINE_ROUNDS"); do
		consumers=(engine bareconsumer)
		[[ -z ${BASELINE_SQUALL:-} ]] || consumers+=(before)
		for c in "${consumers[@]}"; do
			rm -f "$OUT/$c.addr"
			if [[ $c == engine || $c == before ]]; then
				bin=$B/squall
				[[ $c == engine ]] || bin=$BASELINE_SQUALL
				rm -rf "$OUT/archive"
				SQUALL_HTTP=127.0.0.1:0 "$bin" engine --master "$MASTER" --token-file "$OUT/token" \
					--kafka-brokers "$BROKER" --topic bench.engine --dlq-topic bench.engine.dlq --group "$c-$r" \
					--actions-config "$OUT/actions.json" ${WORKERS:+--workers "$WORKERS"} 2>"$OUT/$c-$r.log" &
				pid=$!
				pids+=("$pid")
				addr=$(log_addr "$OUT/$c-$r.log" "ops endpoints listening" addr)
			else
				"$B/bareconsumer" --addr-file "$OUT/$c.addr" --kafka-brokers "$BROKER" --topic bench.engine \
					--group "bare-$r" 2>"$OUT/bare-$r.log" &
				pid=$!
				pids+=("$pid")
				wait_file "$OUT/$c.addr"
				addr=$(cat "$OUT/$c.addr")
			fi
			f=$OUT/engine-$r-$c.json
			if [[ $r == 1 && ${PROFILE_ENGINE:-} == 1 ]]; then
				perf record -F 999 -g -p "$pid" -o "$OUT/$c.perf.data" >/dev/null 2>&1 &
				perf_pid=$!
			fi
			"$B/squall" bench engine --events 0 --expect "$EVENTS" --from-start --metrics "http://$addr/metrics" \
				--json >"$f" 2>"$OUT/engine-$r-$c.progress" || { cat "$f" >&2; exit 1; }
			if [[ -n ${perf_pid:-} ]]; then
				kill -INT "$perf_pid" 2>/dev/null || true
				wait "$perf_pid" || true
				perf_pid=
			fi
			stop "$pid"
			printf '%-6s %-14s %12.0f %14.2f %12.1f\n' "$r" "$c" "$(field "$f" drain_rate)" "$(field "$f" cpu_us_per_event)" \
				"$(awk -v b="$(field "$f" max_rss_bytes)" 'BEGIN {print b/1048576}')"
		done
		awk -v e="$(field "$OUT/engine-$r-engine.json" drain_rate)" -v b="$(field "$OUT/engine-$r-bareconsumer.json" drain_rate)" \
			'BEGIN {print e/b}' >>"$OUT/ratio-engine"
		if [[ -n ${BASELINE_SQUALL:-} ]]; then
			awk -v e="$(field "$OUT/engine-$r-engine.json" drain_rate)" -v b="$(field "$OUT/engine-$r-before.json" drain_rate)" \
				'BEGIN {print e/b}' >>"$OUT/ratio-engine-before"
		fi
		for c in "${consumers[@]}"; do
			field "$OUT/engine-$r-$c.json" cpu_us_per_event >>"$OUT/engine-cpu-$c"
		done
	done
	echo "median of the rounds' ratios: engine/bare consumer events/s $(median <"$OUT/ratio-engine")"
	echo "median CPU per event (us): engine $(median <"$OUT/engine-cpu-engine"), bare consumer $(median <"$OUT/engine-cpu-bareconsumer")"
	if [[ -n ${BASELINE_SQUALL:-} ]]; then
		echo "before: engine/before events/s $(median <"$OUT/ratio-engine-before"), CPU per event before $(median <"$OUT/engine-cpu-before") us"
	fi
fi
