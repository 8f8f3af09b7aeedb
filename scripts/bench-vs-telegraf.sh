#!/usr/bin/env bash
# bench-vs-telegraf.sh runs one MQTT -> PostgreSQL load through Telegraf
# (inputs.mqtt_consumer -> outputs.postgresql) and through
# `edgeplat bench pipeline`, alternating the two round by round, and prints
# both in one table. Method and caveats: docs/benchmarks.md, section
# "edgeplat vs Telegraf". Not run in CI: Telegraf is not there.
#
# Needs: telegraf (PATH or ~/go/bin), mosquitto, psql, jq, a PostgreSQL whose
# user may create databases and a Redis, named by the variables the project
# uses (DB_HOST, DB_PORT, DB_USER, DB_PASSWORD, STREAMSTORE_HOST,
# STREAMSTORE_PORT, STREAMSTORE_DB; the EDGEPLAT_TEST_* ones of the tests
# serve as defaults). Each round gets a private Mosquitto on a free port with
# the settings of docs/scaling.md; Telegraf writes into a fresh database, and
# edgeplat into another; all of it is removed on exit.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: scripts/bench-vs-telegraf.sh [options]

  --publishers N      MQTT publishers, one agent each (4)
  --messages N        messages per publisher (6000)
  --readings N        readings per message (50)
  --rounds N          rounds; each runs Telegraf and edgeplat, in alternating order (3)
  --profile NAME      ingest profile of edgeplat (benchmark)
  --telegraf-batch N  Telegraf's metric_batch_size (1000, its default)
  --telegraf-buffer N Telegraf's metric_buffer_limit (default: room for twice the
                      1000 undelivered messages mqtt_consumer takes, 2000 x readings)
  --edgeplat PATH     edgeplat binary (default: $EDGEPLAT, else built from this checkout)
  --keep-logs         keep the working directory (logs, configs, JSON) on exit
EOF
}

publishers=4 messages=6000 readings=50 rounds=3 profile=benchmark tg_batch=1000 tg_buffer=''
edgeplat_bin=${EDGEPLAT:-} keep_logs=false
while (($#)); do
	case $1 in
	--publishers) publishers=$2; shift 2 ;;
	--messages) messages=$2; shift 2 ;;
	--readings) readings=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--profile) profile=$2; shift 2 ;;
	--telegraf-batch) tg_batch=$2; shift 2 ;;
	--telegraf-buffer) tg_buffer=$2; shift 2 ;;
	--edgeplat) edgeplat_bin=$2; shift 2 ;;
	--keep-logs) keep_logs=true; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
done
tg_buffer=${tg_buffer:-$((2000 * readings))}
for n in "$publishers" "$messages" "$readings" "$rounds" "$tg_batch" "$tg_buffer"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "options take positive integers, got $n" >&2; exit 2; }
done

die() { echo "bench-vs-telegraf: $*" >&2; exit 1; }
log() { echo "bench-vs-telegraf: $*" >&2; }

# Services, as the edgeplat binary reads them.
hostport() { local v=${!1:-}; echo "${v:-$2}"; }
pg_addr=$(hostport EDGEPLAT_TEST_PG_HOST 127.0.0.1)
export DB_HOST=${DB_HOST:-$pg_addr}
export DB_PORT=${DB_PORT:-$(hostport EDGEPLAT_TEST_PG_PORT 5432)}
export DB_USER=${DB_USER:-$(hostport EDGEPLAT_TEST_PG_USER postgres)}
export DB_PASSWORD=${DB_PASSWORD:-${EDGEPLAT_TEST_PG_PASSWORD:-}}
redis_addr=$(hostport EDGEPLAT_TEST_REDIS_ADDR 127.0.0.1:6379)
export STREAMSTORE_HOST=${STREAMSTORE_HOST:-${redis_addr%:*}}
export STREAMSTORE_PORT=${STREAMSTORE_PORT:-${redis_addr##*:}}
export PGPASSWORD=$DB_PASSWORD

# Prerequisites.
telegraf_bin=$(command -v telegraf || true)
if [[ -z $telegraf_bin && -x $HOME/go/bin/telegraf ]]; then
	telegraf_bin=$HOME/go/bin/telegraf
fi
[[ -n $telegraf_bin ]] || die "telegraf is not on PATH nor in ~/go/bin; see docs/benchmarks.md (edgeplat vs Telegraf) for how to build it"
mosquitto_bin=$(command -v mosquitto || true)
if [[ -z $mosquitto_bin && -x /usr/sbin/mosquitto ]]; then
	mosquitto_bin=/usr/sbin/mosquitto
fi
[[ -n $mosquitto_bin ]] || die "no mosquitto in PATH or /usr/sbin"
for tool in psql jq awk; do
	command -v "$tool" >/dev/null || die "$tool is not on PATH"
done
[[ -r /proc/self/stat ]] || die "needs Linux /proc for the CPU and memory figures"
psql_admin() { psql -X -q -v ON_ERROR_STOP=1 -h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d postgres "$@"; }
psql_admin -Atc 'SELECT 1' >/dev/null || die "PostgreSQL at $DB_HOST:$DB_PORT (DB_HOST, DB_PORT, DB_USER) does not answer"
(exec 3<>"/dev/tcp/$STREAMSTORE_HOST/$STREAMSTORE_PORT") 2>/dev/null ||
	die "Redis at $STREAMSTORE_HOST:$STREAMSTORE_PORT (STREAMSTORE_HOST, STREAMSTORE_PORT) does not answer"

work=$(mktemp -d -t bench-vs-telegraf.XXXXXX)
suffix=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
tg_db=bench_vs_telegraf_tg_$suffix
ep_db=bench_vs_telegraf_ep_$suffix
broker_pid='' telegraf_pid='' dbs_made=false

cleanup() {
	local rc=$?
	set +e
	[[ -n $telegraf_pid ]] && stop_pid "$telegraf_pid"
	[[ -n $broker_pid ]] && stop_pid "$broker_pid"
	if $dbs_made; then
		psql_admin -c "DROP DATABASE IF EXISTS $tg_db WITH (FORCE)" -c "DROP DATABASE IF EXISTS $ep_db WITH (FORCE)" >/dev/null
	fi
	if $keep_logs || ((rc != 0)); then
		log "logs and configs kept in $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

stop_pid() {
	kill -TERM "$1" 2>/dev/null || return 0
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

if [[ -z $edgeplat_bin ]]; then
	repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	log "building edgeplat from $repo"
	(cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$work/edgeplat" .)
	edgeplat_bin=$work/edgeplat
fi
[[ -x $edgeplat_bin ]] || die "edgeplat binary $edgeplat_bin is not executable"

psql_admin -c "CREATE DATABASE $tg_db" -c "CREATE DATABASE $ep_db" >/dev/null
dbs_made=true

# --- measuring helpers -------------------------------------------------------

clk_tck=$(getconf CLK_TCK)

# cpu_ticks PID...: user+system ticks of the processes (0 for gone ones).
cpu_ticks() {
	local sum=0 pid rest
	for pid in "$@"; do
		rest=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
		rest=${rest##*) }
		# After the command name: state is field 1, utime 12, stime 13.
		sum=$((sum + $(awk '{print $12 + $13}' <<<"$rest")))
	done
	echo "$sum"
}

# pids_of NAME: processes whose command name is NAME, as bench pipeline
# counts the services.
pids_of() {
	local f comm
	for f in /proc/[0-9]*/comm; do
		comm=$(cat "$f" 2>/dev/null) || continue
		if [[ $comm == "$1" ]]; then
			f=${f#/proc/}
			echo "${f%/comm}"
		fi
	done
}

# cpu_snapshot FILE: "pid ticks" of every postgres and mosquitto process.
cpu_snapshot() {
	local pid
	for name in postgres mosquitto; do
		for pid in $(pids_of "$name"); do
			echo "$name $pid $(cpu_ticks "$pid")"
		done
	done >"$1"
}

# cpu_since BEFORE AFTER NAME: CPU seconds NAME's processes used between the
# snapshots (a process started meanwhile counts whole).
cpu_since() {
	awk -v name="$3" -v tck="$clk_tck" '
		NR == FNR { if ($1 == name) before[$2] = $3; next }
		$1 == name { d = $3 - (($2 in before) && before[$2] <= $3 ? before[$2] : 0); s += d }
		END { printf "%.3f\n", s / tck }' "$1" "$2"
}

free_port() {
	local port
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return
		fi
	done
	die "no free port found"
}

# start_broker: a private Mosquitto with bench cluster --own-broker's
# settings (docs/scaling.md): no drops of acknowledged messages.
start_broker() {
	broker_port=$(free_port)
	{
		echo "listener $broker_port 127.0.0.1"
		printf '%s\n' 'allow_anonymous true' 'persistence false' 'max_inflight_messages 100' \
			'max_queued_messages 1000000' 'set_tcp_nodelay true' 'log_dest stderr' 'log_type error' 'log_type warning'
		if ((EUID == 0)); then echo 'user root'; fi
	} >"$work/mosquitto.conf"
	"$mosquitto_bin" -c "$work/mosquitto.conf" >>"$work/mosquitto.log" 2>&1 &
	broker_pid=$!
	for _ in $(seq 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$broker_port") 2>/dev/null; then
			export MQTT_BROKER_URL=tcp://127.0.0.1:$broker_port
			return
		fi
		kill -0 "$broker_pid" 2>/dev/null || die "mosquitto exited at start: $(tail -3 "$work/mosquitto.log")"
		sleep 0.1
	done
	die "mosquitto did not listen on $broker_port within 10s"
}

stop_broker() {
	stop_pid "$broker_pid"
	broker_pid=''
}

# written_since OFFSET: metrics Telegraf reports written (after the commit)
# in its log past byte OFFSET.
written_since() {
	tail -c "+$(($1 + 1))" "$work/telegraf.log" |
		awk '/Wrote batch of [0-9]+ metrics/ { for (i = 1; i <= NF; i++) if ($i == "of") { s += $(i + 1); break } } END { print s + 0 }'
}

# wait_written OFFSET WANT LIMIT_S: until Telegraf has written WANT metrics
# past OFFSET; fails when nothing moved for LIMIT_S seconds.
wait_written() {
	local got=0 last=-1 still=0
	while :; do
		got=$(written_since "$1")
		((got >= $2)) && return 0
		if ((got == last)); then
			still=$((still + 1))
			((still * 50 >= $3 * 1000)) && die "Telegraf wrote $got of $2 metrics and nothing more for ${3}s; see $work/telegraf.log"
		else
			still=0 last=$got
		fi
		kill -0 "$telegraf_pid" 2>/dev/null || die "telegraf exited: $(tail -5 "$work/telegraf.log")"
		if tail -c "+$(($1 + 1))" "$work/telegraf.log" | grep -q 'Metric buffer overflow'; then
			die "Telegraf dropped metrics (Metric buffer overflow); raise --telegraf-buffer; see $work/telegraf.log"
		fi
		sleep 0.05
	done
}

psql_tg() { psql -X -q -v ON_ERROR_STOP=1 -h "$DB_HOST" -p "$DB_PORT" -U "$DB_USER" -d "$tg_db" "$@"; }

write_telegraf_conf() {
	local pw=''
	[[ -n $DB_PASSWORD ]] && pw=" password=$DB_PASSWORD"
	cat >"$work/telegraf.conf" <<EOF
[agent]
  interval = "10s"
  # mqtt_consumer takes up to max_undelivered_messages (1000) messages
  # before their metrics are written; a buffer smaller than their readings
  # drops metrics ("Metric buffer overflow"), and those messages are then
  # never acknowledged nor delivered again while the session lasts.
  metric_batch_size = $tg_batch
  metric_buffer_limit = $tg_buffer
  flush_interval = "1s"
  flush_jitter = "0s"
  omit_hostname = true
  debug = true
  logfile = "$work/telegraf.log"

[[inputs.mqtt_consumer]]
  servers = ["tcp://127.0.0.1:$broker_port"]
  topics = ["i/+/a/+/endpoints/modbus"]
  qos = 1
  persistent_session = true
  client_id = "telegraf-bench-$suffix"
  max_undelivered_messages = 1000
  topic_tag = ""
  data_format = "influx"

[[outputs.postgresql]]
  connection = "host=$DB_HOST port=$DB_PORT user=$DB_USER dbname=$tg_db sslmode=disable$pw"
EOF
}

# --- one Telegraf round ----------------------------------------------------

# telegraf_round N: prints one JSON object of the round's figures.
telegraf_round() {
	local n=$1 want=$((publishers * messages * readings)) off before after t_end pub
	start_broker
	write_telegraf_conf
	: >"$work/telegraf.log"
	"$telegraf_bin" --config "$work/telegraf.conf" >>"$work/telegraf.out" 2>&1 &
	telegraf_pid=$!
	for _ in $(seq 300); do
		grep -q 'Connected \[' "$work/telegraf.log" && break
		kill -0 "$telegraf_pid" 2>/dev/null || die "telegraf exited: $(tail -5 "$work/telegraf.out" "$work/telegraf.log")"
		sleep 0.1
	done
	grep -q 'Connected \[' "$work/telegraf.log" || die "telegraf did not connect to the broker within 30s"
	# Warm-up: one message through to its rows (the first round creates the
	# table), then an empty table for the measured load.
	off=$(stat -c %s "$work/telegraf.log")
	"$edgeplat_bin" bench publish --format influx --publishers 1 --messages 1 --readings "$readings" --json \
		>/dev/null 2>>"$work/publish.log"
	wait_written "$off" "$readings" 30
	psql_tg -c 'TRUNCATE readings' >/dev/null

	echo 5 2>/dev/null >"/proc/$telegraf_pid/clear_refs" || true # resets VmHWM
	off=$(stat -c %s "$work/telegraf.log")
	local tg0 tg_be tg_be0
	tg_be=$(psql_tg -Atc "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	cpu_snapshot "$work/cpu.before"
	tg0=$(cpu_ticks "$telegraf_pid")
	# shellcheck disable=SC2086 # a list of pids
	tg_be0=$(cpu_ticks $tg_be)
	pub=$("$edgeplat_bin" bench publish --format influx --publishers "$publishers" --messages "$messages" \
		--readings "$readings" --json 2>>"$work/publish.log") || die "bench publish failed: $(tail -3 "$work/publish.log")"
	wait_written "$off" "$want" 60
	t_end=$(date +%s%N)
	cpu_snapshot "$work/cpu.after"
	local tg1 tg_be1 hwm
	tg1=$(cpu_ticks "$telegraf_pid")
	# shellcheck disable=SC2086
	tg_be1=$(cpu_ticks $tg_be)
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$telegraf_pid/status")
	before=$work/cpu.before after=$work/cpu.after
	local rows distinct overflow
	read -r rows distinct < <(psql_tg -AtF' ' -c 'SELECT count(*), count(DISTINCT (agent, metric, time)) FROM readings')
	overflow=$(tail -c "+$((off + 1))" "$work/telegraf.log" | grep -c 'Metric buffer overflow' || true)
	stop_pid "$telegraf_pid"
	telegraf_pid=''
	stop_broker
	jq -n --argjson pub "$pub" --argjson n "$n" --argjson want "$want" --argjson tEnd "$t_end" \
		--argjson tg "$((tg1 - tg0))" --argjson tgbe "$((tg_be1 - tg_be0))" --argjson tck "$clk_tck" \
		--argjson pg "$(cpu_since "$before" "$after" postgres)" --argjson mq "$(cpu_since "$before" "$after" mosquitto)" \
		--argjson hwm "${hwm:-0}" --argjson rows "$rows" --argjson distinct "$distinct" --argjson overflow "$overflow" '
		(($tEnd - $pub.startUnixNano) / 1e9) as $el |
		{round: $n, who: "telegraf", elapsedSeconds: $el, readingsPerSec: ($want / $el),
		 publishRate: $pub.publishMessagesPerSec, messages: $pub.published,
		 cpu: {collector: ($tg / $tck), publisher: $pub.cpuSeconds, postgres: $pg, "postgres-own-backends": ($tgbe / $tck), mosquitto: $mq},
		 peakRssMb: ($hwm / 1024), rows: $rows, duplicates: ($rows - $distinct), missing: ($want - $distinct),
		 bufferOverflows: $overflow}'
}

# --- one edgeplat round ----------------------------------------------------

edgeplat_round() {
	local n=$1 out
	start_broker
	out=$(DB_NAME=$ep_db "$edgeplat_bin" bench pipeline --profile "$profile" --rate 0 --rounds 1 --no-ingest-only --vacuum \
		--publishers "$publishers" --messages "$messages" --readings "$readings" --json 2>>"$work/pipeline.log") ||
		die "bench pipeline failed: $(tail -5 "$work/pipeline.log")"
	stop_broker
	jq --argjson n "$n" '
		{round: $n, who: "edgeplat", elapsedSeconds, readingsPerSec, publishRate: .publishMessagesPerSec, messages,
		 cpu: {collector: .cpuSeconds, postgres: (.serviceCpuSeconds.postgres // null),
		       "redis-server": (.serviceCpuSeconds["redis-server"] // null), mosquitto: (.serviceCpuSeconds.mosquitto // null)},
		 peakRssMb, rows, duplicates, missing: (.messages * .readingsPerMessage - .rows), dropped}' <<<"$out"
}

# --- run -------------------------------------------------------------------

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
log "$publishers publishers x $messages messages x $readings readings, QoS 1, $rounds rounds; telegraf $("$telegraf_bin" --version 2>/dev/null | head -1)"
: >"$work/results.ndjson"
for ((r = 1; r <= rounds; r++)); do
	order=(telegraf edgeplat)
	((r % 2 == 0)) && order=(edgeplat telegraf)
	for who in "${order[@]}"; do
		log "round $r of $rounds: $who"
		# Not in a pipeline: the round's processes must stay known to cleanup.
		"${who}_round" "$r" >"$work/round.json"
		jq -c . "$work/round.json" | tee -a "$work/results.ndjson" >&2
	done
done

# --- table -------------------------------------------------------------------

jq -rs --arg host "$(nproc) CPUs, load average $load_start at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end" \
	--arg profile "$profile" --arg tgconf "metric_batch_size $tg_batch, metric_buffer_limit $tg_buffer, max_undelivered_messages 1000, flush_interval 1s, pool_max_conns 1" '
	def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def fmt: if . == null then "-" else (round | tostring) end;
	def span(f): (map(f) | min | round | tostring) + "-" + (map(f) | max | round | tostring);
	def us(k): map(.cpu[k] as $c | if $c == null then null else $c / .messages * 1e6 end) | map(select(. != null)) | median;
	def col(w):
		map(select(.who == w)) as $r |
		{rate: (($r | map(.readingsPerSec) | median | round | tostring) + " (" + ($r | span(.readingsPerSec)) + ")"),
		 collector: ($r | us("collector")), publisher: ($r | us("publisher")), postgres: ($r | us("postgres")),
		 own: ($r | us("postgres-own-backends")), redis: ($r | us("redis-server")), mosquitto: ($r | us("mosquitto")),
		 rss: ($r | map(.peakRssMb) | median), dup: ($r | map(.duplicates) | add), miss: ($r | map(.missing) | add),
		 rounds: ($r | length)};
	col("telegraf") as $t | col("edgeplat") as $e |
	def row(name; a; b): "| " + name + " | " + a + " | " + b + " |";
	def total(c): [c.collector, c.publisher, c.postgres, c.redis, c.mosquitto] | map(select(. != null)) | add;
	"Host: " + $host + "; " + ($t.rounds | tostring) + " Telegraf and " + ($e.rounds | tostring) + " edgeplat rounds, medians",
	"Telegraf: " + $tgconf + "; edgeplat: bench pipeline --profile " + $profile + " --rate 0 --no-ingest-only --vacuum",
	"",
	row("";"Telegraf";"edgeplat"),
	"|---|---|---|",
	row("readings/s, median (min-max)"; $t.rate; $e.rate),
	row("CPU µs/message: collector"; ($t.collector | fmt) + " (telegraf)"; ($e.collector | fmt) + " (serve-api + ingest + publishers, one process)"),
	row("CPU µs/message: publishers"; ($t.publisher | fmt) + " (bench publish)"; "in the line above"),
	row("CPU µs/message: postgres, all processes"; ($t.postgres | fmt) + " (own backends " + ($t.own | fmt) + ")"; $e.postgres | fmt),
	row("CPU µs/message: redis-server"; "-"; $e.redis | fmt),
	row("CPU µs/message: mosquitto, all processes"; $t.mosquitto | fmt; $e.mosquitto | fmt),
	row("CPU µs/message: total"; total($t) | fmt; total($e) | fmt),
	row("peak RSS MB, median"; ($t.rss | fmt) + " (telegraf)"; ($e.rss | fmt) + " (whole bench process)"),
	row("duplicate / missing rows, all rounds"; ($t.dup | tostring) + " / " + ($t.miss | tostring); ($e.dup | tostring) + " / " + ($e.miss | tostring)),
	row("guarantees"; "at least once from the broker on (persistent session, ack after write); no key, no index: a redelivery is a second row"; "exactly one row per (agent, metric, time): msgId de-duplication, durable Redis stream, primary key")
' "$work/results.ndjson"
