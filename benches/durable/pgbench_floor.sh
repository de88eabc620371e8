#!/usr/bin/env bash
# The floor a durable-run store on PostgreSQL cannot go under: what the server
# itself needs, through pgbench, for the statements a store's step costs.
#
#   benches/durable/pgbench_floor.sh URL
#
# URL: a PostgreSQL URL, e.g. "$(interop/postgres.sh url)". One client, prepared
# statements (-M prepared, so every value travels as a parameter), -n, each
# test for $FLOOR_SECONDS seconds (default 10), $FLOOR_RUNS runs of each
# (default 1, interleaved). Tables go in the schema phaseo_floor, made fresh
# and dropped at the end. Tests:
#   select 1     SELECT 1: one round trip, no commit to flush (the wire floor)
#   commit       INSERT of one int into a one-column table: a bare durable commit
#   journal      INSERT of one ~120 B journal row (committed), then SELECT of a
#                6.7 KB text snapshot
#   snapshot     upsert of a 6.7 KB text snapshot (ON CONFLICT DO UPDATE), then
#                SELECT of it
# Prints the server's durability settings, the snapshot's stored size, and per
# test the latency average (ms) and transactions per second as pgbench reports
# them. pgbench comes from $PHASEO_INTEROP_POSTGRES_BIN (default
# /usr/lib/postgresql/15/bin), else PATH.
set -euo pipefail
shopt -s inherit_errexit

URL="${1:-}"
[[ -n "$URL" ]] || { printf 'usage: %s URL\n' "$0" >&2; exit 2; }
SECONDS_EACH="${FLOOR_SECONDS:-10}"
RUNS="${FLOOR_RUNS:-1}"
[[ "$SECONDS_EACH" =~ ^[0-9]+$ && "$RUNS" =~ ^[0-9]+$ ]] || {
    printf 'FLOOR_SECONDS and FLOOR_RUNS must be numbers\n' >&2; exit 2; }
PG_BIN="${PHASEO_INTEROP_POSTGRES_BIN:-/usr/lib/postgresql/15/bin}"
PGBENCH="$PG_BIN/pgbench"
[[ -x "$PGBENCH" ]] || PGBENCH="$(command -v pgbench)" ||
    { printf 'pgbench not found (Debian: apt-get install postgresql-15)\n' >&2; exit 1; }
command -v psql >/dev/null || { printf 'psql not found\n' >&2; exit 1; }

log() { printf '[floor] %s\n' "$*" >&2; }
sql() { psql "$URL" -X -q -v ON_ERROR_STOP=1 -At "$@"; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/phaseo-floor.XXXXXX")"
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    sql -c 'DROP SCHEMA IF EXISTS phaseo_floor CASCADE' 2>/dev/null || true
    rm -rf -- "$WORK"
}
trap cleanup EXIT

# The snapshot: 6,700 bytes of JSON keys, words and hex ids picked by md5; pglz
# compresses it to about 4 KB (1.7x; LangGraph's msgpack of a conversation:
# 2.6x).
sql < "$(dirname "${BASH_SOURCE[0]}")/floor_schema.sql"
SNAPSHOT="$(sql -c 'SELECT body FROM phaseo_floor.snapshot WHERE id = 1')"
ENTRY='{"kind":"tool_result","call_id":"call_status_1","output":{"status":"ok","service":"api"}}'

cat > "$WORK/select1.sql" <<'SQL'
SELECT 1;
SQL
cat > "$WORK/commit.sql" <<'SQL'
INSERT INTO phaseo_floor.tiny (v) VALUES (1);
SQL
cat > "$WORK/journal.sql" <<'SQL'
INSERT INTO phaseo_floor.journal (run_id, entry) VALUES (1, :entry);
SELECT body FROM phaseo_floor.snapshot WHERE id = 1;
SQL
cat > "$WORK/snapshot.sql" <<'SQL'
INSERT INTO phaseo_floor.snapshot (id, body) VALUES (2, :snapshot)
    ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body;
SELECT body FROM phaseo_floor.snapshot WHERE id = 2;
SQL

TESTS=(select1 commit journal snapshot)
declare -A LABEL=(
    [select1]="select 1 (round trip, no commit)"
    [commit]="(i) bare commit: 1-int insert"
    [journal]="(ii) journal row commit + 6.7 KB read"
    [snapshot]="(iii) 6.7 KB upsert + read"
)
declare -A LAT TPS WAL SYNCS

server="$(sql -c "SELECT setting FROM pg_settings WHERE name = 'server_version'")"
settings="$(sql -F= -c "SELECT name, current_setting(name) FROM pg_settings
    WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes', 'shared_buffers')
    ORDER BY name" | paste -sd' ')"
stored="$(sql -F' ' -c "SELECT octet_length(body), pg_column_size(body), coalesce(pg_column_compression(body), 'none')
    FROM phaseo_floor.snapshot WHERE id = 1")"
read -r snap_len snap_stored snap_comp <<<"$stored"
log "PostgreSQL $server; $settings"
log "snapshot: $snap_len bytes of text, stored in $snap_stored bytes ($snap_comp)"
log "pgbench $("$PGBENCH" --version | awk '{ print $3 }'), one client, -M prepared, ${SECONDS_EACH} s per test, $RUNS run(s)"

for run in $(seq 1 "$RUNS"); do
    for t in "${TESTS[@]}"; do
        out="$WORK/$t.$run.out"
        # The WAL written and the WAL syncs (fsyncs) of the whole test, per transaction.
        wal0="$(sql -F' ' -c 'SELECT pg_current_wal_lsn(), wal_sync FROM pg_stat_wal')"
        if ! "$PGBENCH" -n -c 1 -j 1 -M prepared -T "$SECONDS_EACH" \
            -D "entry=$ENTRY" -D "snapshot=$SNAPSHOT" -f "$WORK/$t.sql" "$URL" > "$out" 2>&1; then
            cat "$out" >&2
            log "pgbench failed on $t"; exit 1
        fi
        lat="$(awk '/^latency average/ { print $4 }' "$out")"
        tps="$(awk '/^tps =/ { printf "%.0f", $3 }' "$out")"
        n="$(awk '/^number of transactions actually processed/ { print $NF }' "$out")"
        sql -c 'SELECT pg_stat_force_next_flush()' > /dev/null
        read -r lsn0 sync0 <<<"$wal0"
        read -r wal syncs <<<"$(sql -F' ' -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn0') / $n,
            (wal_sync - $sync0)::float / $n FROM pg_stat_wal")"
        log "run $run: $t: latency average $lat ms, $tps tps, $n transactions, $(printf '%.0f' "$wal") B WAL and $(printf '%.2f' "$syncs") WAL syncs per transaction"
        LAT[$t]+="$lat "
        TPS[$t]+="$tps "
        WAL[$t]="$wal"
        SYNCS[$t]="$syncs"
    done
done

# median of a list of numbers
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

printf '\npgbench floor: PostgreSQL %s, %s\n' "$server" "$settings"
printf 'one client, -M prepared, %s s x %s run(s); snapshot %s B text stored in %s B (%s)\n\n' \
    "$SECONDS_EACH" "$RUNS" "$snap_len" "$snap_stored" "$snap_comp"
printf '%-40s %11s %8s %9s %7s   %s\n' "test" "latency ms" "tps" "WAL B/tx" "syncs" "(per run: ms)"
for t in "${TESTS[@]}"; do
    printf '%-40s %11.3f %8.0f %9.0f %7.2f   (%s)\n' "${LABEL[$t]}" \
        "$(median <<<"${LAT[$t]}")" "$(median <<<"${TPS[$t]}")" "${WAL[$t]}" "${SYNCS[$t]}" "${LAT[$t]% }"
done
printf '(WAL B/tx and syncs: WAL written and WAL fsyncs per transaction in the last run)\n'
