#!/usr/bin/env bash
# Side-by-side benchmarks with real processes (docs/BENCHMARKS.md, "Side by
# side"). From the repository's root:
#
#   internal/bench/sidebyside/run.sh
#
# 1. Intake: a kfake broker in its own process; squall satellite, the plain
#    handler and the naive kafka-go handler, each loaded in turn with
#    squall bench webhook (closed loop, CONNECTIONS connections, DURATION
#    each) for ROUNDS interleaved rounds; prints each round, the medians
#    of the per-round ratios satellite/plain and satellite/naive, and the
#    satellites' records per produce request. Each round also shows the
#    load generator's own CPU per request and "busy": the target, the
#    broker and the load generator together, as a share of the machine's
#    CPUs (near 100%, the machine's CPU is what limits the round).
# 2. Engine: EVENTS events preloaded into one topic; squall engine (a master
#    serves it a tree whose rule archives every event) and the bare consumer
#    drain it in turn, each as a new consumer group from the start, for
#    ENGINE_ROUNDS interleaved rounds, measured with squall bench engine;
#    prints the drain rates, the engine's CPU per event and the median ratio.
# 3. Findings (only when PARTS names it): three squall master processes (a
#    cluster with fsync) and squall bench findings inserting at the leader
#    (CONNECTIONS connections, no readers, DURATION per round, ROUNDS
#    rounds); prints inserts/s, p50, p99, the three masters' CPU per
#    insert, the leader's alone, the load generator's, and the share of
#    the machine's CPUs they took, then the means of the masters' stage
#    metrics over the rounds (batch size and wait, the wait from a batch's
#    answer to the next batch's submission, what closed the batches,
#    submitted -> applied, raft log append and
#    state-file apply on the leader and a follower). With BASELINE_SQUALL,
#    a second cluster of that binary takes its turn in each round (the
#    two go first in turn).
#
# Settings (environment): ROUNDS (5), DURATION (10s), CONNECTIONS (64),
# TENANTS (1: every event of one tenant, so one partition; N: the intake's
# load spread over N webhooks of N tenants, by N load generators),
# EVENTS (200000), ENGINE_ROUNDS (3), WORKERS (the engine's --workers,
# default its own), PARTS (any of intake, engine and findings; default
# "intake engine"), OUT (a
# folder for the binaries, logs and JSON summaries; default a new temporary
# one). BASELINE_SQUALL names another squall binary (an older version): its
# satellite (and engine) then run as a fourth target ("before"), in the same
# rounds, for before/after figures; ALONGSIDE=N then adds N rounds in
# which the satellite and before are loaded at the same time, each by its
# own load generator (CONNECTIONS connections each), and prints each one's
# CPU per answer and their ratio per round (the neighbours' load weighs on
# both alike), with the broker's CPU per answer of both. SATELLITE_GOGC sets GOGC for the
# satellite under test only (unset, it runs with its own default, GOGC=400,
# as users run it). SATELLITE_ARGS are more flags for the satellite under
# test only (e.g. "--kafka-compression lz4"). PROFILE_SATELLITE=1 records a CPU profile of the satellite with perf
# during its first round (OUT/satellite.perf.data), PROFILE_BROKER=1 the
# broker during that same round (OUT/broker.perf.data), PROFILE_ENGINE=1 the
# engine and the bare consumer during theirs (OUT/engine.perf.data,
# OUT/bareconsumer.perf.data). CPU_PROFILES=DIR has the squall under test
# (not BASELINE_SQUALL) write Go CPU profiles into DIR with --cpu-profile:
# satellite.pprof, engine-ROUND.pprof and findings-mN.pprof, each over its
# process's whole life (pgo.sh makes cmd/squall/default.pgo from them).
# KEEP_DATA=1 keeps the findings clusters' data directories
# (OUT/findings-CLUSTER), deleted otherwise once their figures are printed.
# Every process it starts is stopped when it ends.
set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
EVENTS=${EVENTS:-200000}
ENGINE_ROUNDS=${ENGINE_ROUNDS:-3}
WORKERS=${WORKERS:-}
PARTS=${PARTS:-intake engine}
TENANTS=${TENANTS:-1}
ALONGSIDE=${ALONGSIDE:-0}
CPU_PROFILES=${CPU_PROFILES:-}
[[ -z $CPU_PROFILES ]] || mkdir -p "$CPU_PROFILES"
# profile_args NAME: the --cpu-profile flag of the squall under test's
# process NAME with CPU_PROFILES, nothing without.
profile_args() { [[ -z $CPU_PROFILES ]] || echo "--cpu-profile $CPU_PROFILES/$1.pprof"; }
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

# busy RATE US...: the share of the machine's CPUs, in percent, that RATE
# operations per second take at the sum of the CPU microseconds per
# operation given.
busy() { awk -v r="$1" -v n="$(nproc)" 'BEGIN {for (i = 2; i < ARGC; i++) s += ARGV[i]; print r*s/(n*1e4)}' "$@"; }

# median: the median of the numbers on standard input.
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

here=./internal/bench/sidebyside
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
{"id": "bench", "token": "bench-token-0123456789", "tenant_id": "bench",
 "collector_config": {"event_type": "bench", "payload": {"body": "${@}"}}}
JSON
	# With TENANTS > 1, one more webhook per tenant (bench-1 ... bench-N),
	# each with its own tenant, so its own record key.
	if ((TENANTS > 1)); then
		for i in $(seq "$TENANTS"); do
			printf '{"id": "bench-%s", "token": "bench-token-0123456789", "tenant_id": "tenant-%s",\n "collector_config": {"event_type": "bench", "payload": {"body": "${@}"}}}\n' \
				"$i" "$i" >"$OUT/webhooks/bench-$i.json"
		done
	fi
	sat_env=()
	[[ -z ${SATELLITE_GOGC:-} ]] || sat_env=("GOGC=$SATELLITE_GOGC")
	env "${sat_env[@]}" "$B/squall" satellite --http 127.0.0.1:0 --name bench --webhooks-dir "$OUT/webhooks" \
		--kafka-brokers "$BROKER" --spool-dir "$OUT/spool" ${SATELLITE_ARGS:-} $(profile_args satellite) 2>"$OUT/satellite.log" &
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
		[satellite]="http://$SAT/engine/webhook/event/bench?token=bench-token-0123456789"
		[plain]="http://$(cat "$OUT/plain.addr")/"
		[naive]="http://$(cat "$OUT/naive.addr")/"
	)
	if [[ -n ${BASELINE_SQUALL:-} ]]; then
		url[before]="http://$(log_addr "$OUT/before.log" "satellite started" http)/engine/webhook/event/bench?token=bench-token-0123456789"
	fi
	body=$OUT/body.json
	printf '%s' '{"id":12345,"source":"github","kind":"push","repo":"acme/widgets","ref":"refs/heads/main","ts":1700000000}' >"$body"
	# load TARGET JSON PROGRESS: loads TARGET for DURATION with CONNECTIONS
	# connections and writes the summary to JSON. With TENANTS > 1, TENANTS
	# load generators share the connections, each posting to its tenant's
	# webhook (the plain and naive handlers take any path); the summary
	# then has their answers and throughputs summed, the p50 weighted by
	# answers and the largest p99.
	load() {
		if ((TENANTS <= 1)); then
			"$B/squall" bench webhook --url "${url[$1]}" --connections "$CONNECTIONS" --duration "$DURATION" \
				--body-file "$body" --json >"$2" 2>"$3"
			return
		fi
		local i lpids=()
		for i in $(seq "$TENANTS"); do
			"$B/squall" bench webhook --url "${url[$1]/\/bench\?/\/bench-$i?}" --connections $((CONNECTIONS / TENANTS > 0 ? CONNECTIONS / TENANTS : 1)) \
				--duration "$DURATION" --body-file "$body" --json >"$2.$i" 2>"$3.$i" &
			lpids+=($!)
		done
		for i in "${lpids[@]}"; do wait "$i"; done
		for i in $(seq "$TENANTS"); do
			printf '%s %s %s %s %s %s\n' "$(field "$2.$i" answered)" "$(field "$2.$i" non_2xx)" "$(field "$2.$i" throughput)" \
				"$(field "$2.$i" p50)" "$(field "$2.$i" p99)" "$(field "$2.$i" client_cpu_seconds)"
		done | awk '{a+=$1; n+=$2; t+=$3; p50+=$1*$4; if ($5>p99) p99=$5; c+=$6}
			END {printf "{\n  \"answered\": %d,\n  \"non_2xx\": %d,\n  \"throughput\": %f,\n  \"p50\": %f,\n  \"p99\": %f,\n  \"client_cpu_us_per_answer\": %f\n}\n", a, n, t, p50/a, p99, c*1e6/a}' >"$2"
	}
	echo
	echo "intake: $ROUNDS rounds of $DURATION per target, $CONNECTIONS connections, 106-byte body"
	((TENANTS <= 1)) || echo "($TENANTS tenants: $TENANTS load generators of $((CONNECTIONS / TENANTS > 0 ? CONNECTIONS / TENANTS : 1)) connections, each on its tenant's webhook)"
	echo "(cpu-us/req: the target's process CPU per answer; broker-us/req: the broker's, in the same round;"
	echo " client-us/req: the load generator's; busy: the three together, in CPU per second of the machine's $(nproc) CPUs)"
	printf '%-6s %-10s %10s %9s %9s %7s %11s %13s %13s %5s\n' round target req/s p50-ms p99-ms non2xx cpu-us/req broker-us/req \
		client-us/req busy
	for r in $(seq "$ROUNDS"); do
		for t in "${targets[@]}"; do
			f=$OUT/intake-$r-$t.json
			if [[ $t == satellite && $r == 1 && ${PROFILE_SATELLITE:-} == 1 ]]; then
				perf record -F 499 -g -p "$sat_pid" -o "$OUT/satellite.perf.data" -- sleep "${DURATION%s}" >/dev/null 2>&1 &
				perf_pid=$!
			fi
			if [[ $t == satellite && $r == 1 && ${PROFILE_BROKER:-} == 1 ]]; then
				perf record -F 499 -g -p "${pids[0]}" -o "$OUT/broker.perf.data" -- sleep "${DURATION%s}" >/dev/null 2>&1 &
				perf_broker_pid=$!
			fi
			c0=$(cpu "${pid_of[$t]}") b0=$(cpu "${pids[0]}")
			load "$t" "$f" "$OUT/intake-$r-$t.progress"
			c1=$(cpu "${pid_of[$t]}") b1=$(cpu "${pids[0]}")
			answered=$(field "$f" answered)
			awk -v a="$c0" -v b="$c1" -v n="$answered" 'BEGIN {print (b-a)*1e6/n}' >"$OUT/intake-$r-$t.cpu"
			awk -v a="$b0" -v b="$b1" -v n="$answered" 'BEGIN {print (b-a)*1e6/n}' >"$OUT/intake-$r-$t.brokercpu"
			if [[ -n ${perf_pid:-} ]]; then
				wait "$perf_pid" || true
				perf_pid=
			fi
			if [[ -n ${perf_broker_pid:-} ]]; then
				wait "$perf_broker_pid" || true
				perf_broker_pid=
			fi
			client=$(field "$f" client_cpu_us_per_answer)
			printf '%-6s %-10s %10.0f %9.2f %9.2f %7s %11.1f %13.1f %13.1f %4.0f%%\n' "$r" "$t" "$(field "$f" throughput)" "$(field "$f" p50)" \
				"$(field "$f" p99)" "$(field "$f" non_2xx)" "$(cat "$OUT/intake-$r-$t.cpu")" "$(cat "$OUT/intake-$r-$t.brokercpu")" \
				"${client:-nan}" "$(busy "$(field "$f" throughput)" "$(cat "$OUT/intake-$r-$t.cpu")" "$(cat "$OUT/intake-$r-$t.brokercpu")" "${client:-nan}")"
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
	# serving URL, from its kafka metrics (all rounds together), and its
	# produce requests per second during its rounds and the share of
	# requests carrying one record.
	records_per_request() {
		curl -fsS "$1/metrics" | awk -v secs="$(awk -v r="$ROUNDS" -v d="${DURATION%s}" 'BEGIN {print r*d}')" \
			'/^squall_kafka_batch_records_sum /{s=$2} /^squall_kafka_batch_records_count /{c=$2}
			/^squall_kafka_batch_records_bucket\{le="1"\} /{one=$2}
			END {if (c > 0) printf "%.1f (%.0f requests/s, %.0f%% of one record)", s/c, c/secs, 100*one/c; else print "nan"}'
	}
	batches="satellite $(records_per_request "http://$SAT")"
	if [[ -n ${BASELINE_SQUALL:-} ]]; then
		echo "before: satellite/before req/s $(median <"$OUT/ratio-before"), p99 $(median <"$OUT/ratio-p99-before");" \
			"CPU per request before $(median <"$OUT/cpu-before") us"
		batches+=", before $(records_per_request "${url[before]%%/engine/*}")"
	fi
	echo "records per produce request (all rounds): $batches"
	if [[ -n ${BASELINE_SQUALL:-} ]] && ((ALONGSIDE > 0)); then
		# Both satellites loaded at the same time, each by its own load
		# generator: the neighbours' load weighs on both alike.
		echo
		echo "alongside: $ALONGSIDE rounds of $DURATION, the satellite and before loaded at the same time"
		printf '%-6s %14s %16s %11s %13s %7s %13s\n' round satellite-req/s satellite-us/req before-req/s before-us/req ratio broker-us/req
		for r in $(seq "$ALONGSIDE"); do
			s0=$(cpu "$sat_pid") o0=$(cpu "${pid_of[before]}") b0=$(cpu "${pids[0]}")
			load satellite "$OUT/along-$r-satellite.json" "$OUT/along-$r-satellite.progress" &
			lp1=$!
			load before "$OUT/along-$r-before.json" "$OUT/along-$r-before.progress" &
			lp2=$!
			wait "$lp1"
			wait "$lp2"
			s1=$(cpu "$sat_pid") o1=$(cpu "${pid_of[before]}") b1=$(cpu "${pids[0]}")
			sa=$(field "$OUT/along-$r-satellite.json" answered) oa=$(field "$OUT/along-$r-before.json" answered)
			sc=$(awk -v a="$s0" -v b="$s1" -v n="$sa" 'BEGIN {print (b-a)*1e6/n}')
			oc=$(awk -v a="$o0" -v b="$o1" -v n="$oa" 'BEGIN {print (b-a)*1e6/n}')
			awk -v s="$sc" -v o="$oc" 'BEGIN {print s/o}' >>"$OUT/along-ratio"
			printf '%-6s %14.0f %16.2f %11.0f %13.2f %7.3f %13.2f\n' "$r" "$(field "$OUT/along-$r-satellite.json" throughput)" "$sc" \
				"$(field "$OUT/along-$r-before.json" throughput)" "$oc" "$(tail -n1 "$OUT/along-ratio")" \
				"$(awk -v a="$b0" -v b="$b1" -v n="$((sa + oa))" 'BEGIN {print (b-a)*1e6/n}')"
		done
		echo "alongside: median of the rounds' satellite/before CPU per request $(median <"$OUT/along-ratio")"
	fi
	[[ -z ${BASELINE_SQUALL:-} ]] || stop "${pid_of[before]}"
	stop "$sat_pid"
fi

if [[ " $PARTS " == *" engine "* ]]; then
	"$B/squall" master --node-id m1 --data-dir "$OUT/master" --http 127.0.0.1:0 --raft 127.0.0.1:0 --bootstrap \
		--allow-unsigned-tokens 2>"$OUT/master.log" &
	pids+=($!)
	MASTER=http://$(log_addr "$OUT/master.log" "master started" http_addr)
	"$B/squall" token --user bench --auth all=root:admin --unsigned >"$OUT/token"
	chmod 600 "$OUT/token"
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
				bin=$B/squall prof=$(profile_args "engine-$r")
				[[ $c == engine ]] || bin=$BASELINE_SQUALL prof=
				rm -rf "$OUT/archive"
				SQUALL_HTTP=127.0.0.1:0 "$bin" engine --master "$MASTER" --token-file "$OUT/token" \
					--kafka-brokers "$BROKER" --topic bench.engine --dlq-topic bench.engine.dlq --group "$c-$r" \
					--actions-config "$OUT/actions.json" ${WORKERS:+--workers "$WORKERS"} $prof 2>"$OUT/$c-$r.log" &
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

# stage_mean URL METRIC [LABELS]: the mean (sum / count) of the histogram
# METRIC (the series with LABELS, e.g. {command="x"}) in the /metrics of
# URL since the process started, "n/a" without it (an older binary).
stage_mean() {
	curl -sf -H "Authorization: Bearer $token" "$1/metrics" | awk -v m="$2" -v l="${3:-}" '
		$1 == m "_sum" l {s = $2} $1 == m "_count" l {n = $2}
		END {if (n > 0) printf "%.4g\n", s / n; else print "n/a"}'
}

# closes URL: the leader's group-commit batches by what closed them
# (squall_store_finding_batches_total), "n/a" from an older binary.
closes() {
	curl -sf -H "Authorization: Bearer $token" "$1/metrics" | awk '
		$1 ~ /^squall_store_finding_batches_total\{/ {
			c = $1; sub(/.*close="/, "", c); sub(/".*/, "", c); out = out sep c " " $2; sep = ", "
		}
		END {if (out == "") print "n/a"; else print out}'
}

# ms X: X seconds in milliseconds, "n/a" kept.
ms() { awk -v x="$1" 'BEGIN {if (x == "n/a") print x; else printf "%.2f\n", x * 1000}'; }

# stages CLUSTER: where the inserts' time went, from the masters' stage
# metrics over all rounds (docs/BENCHMARKS.md, "Findings").
stages() {
	local l=${leader_url[$1]} f=${follower_url[$1]}
	echo "findings stages, $1 (means): batch $(stage_mean "$l" squall_store_finding_batch_size) findings," \
		"batch wait $(ms "$(stage_mean "$l" squall_store_finding_batch_wait_seconds)") ms" \
		"(answer -> next submitted $(ms "$(stage_mean "$l" squall_store_finding_batch_after_answer_seconds)") ms; closed: $(closes "$l"))," \
		"submitted -> applied $(ms "$(stage_mean "$l" squall_store_apply_duration_seconds '{command="insert_findings"}')") ms," \
		"log append $(ms "$(stage_mean "$l" squall_store_raft_log_append_seconds)") ms (follower $(ms "$(stage_mean "$f" squall_store_raft_log_append_seconds)") ms)," \
		"state-file apply $(ms "$(stage_mean "$l" squall_store_fsm_apply_seconds)") ms (follower $(ms "$(stage_mean "$f" squall_store_fsm_apply_seconds)") ms)"
}

if [[ " $PARTS " == *" findings "* ]]; then
	printf '%s\n' 0123456789abcdef0123456789abcdef >"$OUT/hmac.key"
	printf '%s\n' fedcba9876543210fedcba9876543210 >"$OUT/join.token"
	chmod 600 "$OUT/hmac.key" "$OUT/join.token"
	"$B/squall" token --user bench --auth all=root:admin --tenant bench --hmac-key-file "$OUT/hmac.key" >"$OUT/findings.token"
	chmod 600 "$OUT/findings.token"
	token=$(cat "$OUT/findings.token")
	clusters=(squall)
	[[ -z ${BASELINE_SQUALL:-} ]] || clusters+=(before)
	declare -A master_pids leader_url follower_url leader_pid
	for c in "${clusters[@]}"; do
		bin=$B/squall
		[[ $c == squall ]] || bin=$BASELINE_SQUALL
		first=
		for n in 1 2 3; do
			args=(master --node-id "m$n" --data-dir "$OUT/findings-$c/m$n" --http 127.0.0.1:0 --raft 127.0.0.1:0
				--token-hmac-key-file "$OUT/hmac.key" --join-token-file "$OUT/join.token" --log-level info)
			if [[ -z $first ]]; then args+=(--bootstrap); else args+=(--join "http://$first"); fi
			[[ $c != squall || -z $CPU_PROFILES ]] || args+=(--cpu-profile "$CPU_PROFILES/findings-m$n.pprof")
			"$bin" "${args[@]}" 2>"$OUT/findings-$c-m$n.log" &
			pids+=($!)
			master_pids[$c]+=" $!"
			eval "pid_${c}_m$n=$!"
			addr=$(log_addr "$OUT/findings-$c-m$n.log" "master started" http_addr)
			[[ -n $first ]] || first=$addr
			eval "addr_${c}_m$n=$addr"
		done
		# Until the three are voters; then the leader's address.
		leader=
		for _ in $(seq 300); do
			info=$(curl -sf -H "Authorization: Bearer $token" "http://$first/squall/v1/cluster" || true)
			if [[ $(grep -o '"suffrage":"voter"' <<<"$info" | wc -l) == 3 ]]; then
				leader=$(sed -n 's/.*"leader_id":"\([^"]*\)".*/\1/p' <<<"$info")
				[[ -n $leader ]] && break
			fi
			sleep 0.1
		done
		[[ -n $leader ]] || { echo "findings: the $c cluster has no leader with 3 voters" >&2; exit 1; }
		leader_url[$c]=http://$(eval "echo \$addr_${c}_$leader")
		leader_pid[$c]=$(eval "echo \$pid_${c}_$leader")
		for n in 1 2 3; do
			[[ m$n == "$leader" ]] || follower_url[$c]=http://$(eval "echo \$addr_${c}_m$n")
		done
	done
	echo
	echo "findings: $ROUNDS rounds of $DURATION per cluster, $CONNECTIONS connections inserting at the leader"
	echo "(cpu-us/insert: the three masters' process CPU per insert answered; leader-us/insert: the leader's alone;"
	echo " client-us/insert: the load generator's; busy: the masters and the load generator, in CPU per second of the machine's $(nproc) CPUs)"
	printf '%-6s %-8s %10s %9s %9s %7s %14s %16s %16s %5s\n' round cluster inserts/s p50-ms p99-ms non2xx cpu-us/insert leader-us/insert \
		client-us/insert busy
	for r in $(seq "$ROUNDS"); do
		# The clusters take turns going first: at load 6-7 the same binary
		# in both clusters measured ~25% slower going first in each round.
		order=("${clusters[@]}")
		((r % 2)) || order=("${clusters[@]:1}" "${clusters[0]}")
		for c in "${order[@]}"; do
			f=$OUT/findings-$r-$c.json
			c0=0
			for pid in ${master_pids[$c]}; do c0=$(awk -v a="$c0" -v b="$(cpu "$pid")" 'BEGIN {print a+b}'); done
			l0=$(cpu "${leader_pid[$c]}")
			"$B/squall" bench findings --url "${leader_url[$c]}" --token-file "$OUT/findings.token" --connections "$CONNECTIONS" \
				--readers 0 --duration "$DURATION" --json >"$f" 2>"$OUT/findings-$r-$c.progress"
			c1=0
			for pid in ${master_pids[$c]}; do c1=$(awk -v a="$c1" -v b="$(cpu "$pid")" 'BEGIN {print a+b}'); done
			l1=$(cpu "${leader_pid[$c]}")
			awk -v a="$c0" -v b="$c1" -v n="$(field "$f" answered)" 'BEGIN {print (b-a)*1e6/n}' >>"$OUT/findings-cpu-$c"
			awk -v a="$l0" -v b="$l1" -v n="$(field "$f" answered)" 'BEGIN {print (b-a)*1e6/n}' >>"$OUT/findings-leadercpu-$c"
			field "$f" throughput >>"$OUT/findings-rate-$c"
			field "$f" p99 >>"$OUT/findings-p99-$c"
			client=$(field "$f" client_cpu_us_per_answer)
			printf '%-6s %-8s %10.0f %9.2f %9.2f %7s %14.1f %16.1f %16.1f %4.0f%%\n' "$r" "$c" "$(field "$f" throughput)" "$(field "$f" p50)" \
				"$(field "$f" p99)" "$(field "$f" non_2xx)" "$(tail -n1 "$OUT/findings-cpu-$c")" "$(tail -n1 "$OUT/findings-leadercpu-$c")" \
				"${client:-nan}" "$(busy "$(field "$f" throughput)" "$(tail -n1 "$OUT/findings-cpu-$c")" "${client:-nan}")"
		done
	done
	for c in "${clusters[@]}"; do
		echo "findings medians, $c: inserts/s $(median <"$OUT/findings-rate-$c"), p99 $(median <"$OUT/findings-p99-$c") ms," \
			"CPU per insert $(median <"$OUT/findings-cpu-$c") us, the leader's $(median <"$OUT/findings-leadercpu-$c") us"
		stages "$c"
		for pid in ${master_pids[$c]}; do stop "$pid"; done
		# The masters' data (about 1 GB per cluster after 5 rounds of 8 s)
		# would fill the disk over a few runs.
		[[ -n ${KEEP_DATA:-} ]] || rm -rf "$OUT/findings-$c"
	done
fi
