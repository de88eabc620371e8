#!/usr/bin/env bash
# A private, throw-away PostgreSQL 15 cluster on 127.0.0.1, for the PostgreSQL
# run store's tests and the durable-run benchmarks (benches/durable/).
#
#   interop/postgres.sh start  [PORT]   prints the URL postgres://postgres@127.0.0.1:PORT/phaseo
#   interop/postgres.sh url    [PORT]   prints that URL (whether or not the cluster runs)
#   interop/postgres.sh status [PORT]   exit 0 if our cluster on PORT runs, 1 if not
#   interop/postgres.sh stop   [PORT]
#
# PORT defaults to $PHASEO_INTEROP_POSTGRES_PORT, else 15432. `start` runs
# initdb into a fresh directory made by mktemp under ${TMPDIR:-/tmp}
# (phaseo-interop-pg.XXXXXX), with trust authentication, listening only on
# 127.0.0.1:PORT, the Unix socket in that directory, every other setting at its
# default (fsync, synchronous_commit on), and creates the database `phaseo`.
# PostgreSQL refuses to run as root: as root, initdb and the server run as the
# `postgres` OS user (runuser); as any other user, as that user.
#
# Server binaries: $PHASEO_INTEROP_POSTGRES_BIN (default /usr/lib/postgresql/15/bin,
# Debian's layout). When they are missing and that variable is unset, `start`
# installs Debian's postgresql-15 with apt-get (needs root; `apt-get update`
# first only if the install fails). The package also brings psql and pgbench.
#
# State file: $PHASEO_INTEROP_CACHE/run/postgres.PORT.state (line 1 the
# postmaster's PID, line 2 the directory). `stop` stops exactly that PID
# (pg_ctl stop -m fast, then SIGQUIT and SIGKILL if it is still there), only if
# its command line still names the directory, then deletes the directory and
# keeps the server log as $PHASEO_INTEROP_CACHE/run/postgres.PORT.log.
# Both commands are idempotent: `start` on a running cluster prints its URL,
# `stop` on a stopped one does nothing. A state file left by a killed run is
# cleaned up by the next `start` or `stop`.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PG_MAJOR=15
PG_BIN="${PHASEO_INTEROP_POSTGRES_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}"
PG_OS_USER=postgres
DATABASE=phaseo
DIR_PREFIX="phaseo-interop-pg."

CMD="${1:-}"
PORT="${2:-${PHASEO_INTEROP_POSTGRES_PORT:-15432}}"
check_port "$PORT"
STATE="$INTEROP_RUN/postgres.$PORT.state"
LOGFILE="$INTEROP_RUN/postgres.$PORT.log"

url() { printf 'postgres://postgres@127.0.0.1:%s/%s\n' "$PORT" "$DATABASE"; }

# as_pg CMD...: run CMD as the postgres OS user when we are root.
as_pg() {
    if (( EUID == 0 )); then runuser -u "$PG_OS_USER" -- "$@"; else "$@"; fi
}

# read_state: set STATE_PID and STATE_DIR from the state file (empty if none).
# The PID comes from the data directory's postmaster.pid when the state file
# has none yet (a start interrupted before it recorded it).
read_state() {
    STATE_PID="" STATE_DIR=""
    [[ -f "$STATE" ]] || return 0
    { read -r STATE_PID || true; read -r STATE_DIR || true; } < "$STATE"
    if [[ -z "$STATE_PID" && -f "$STATE_DIR/data/postmaster.pid" ]]; then
        STATE_PID="$(head -n1 "$STATE_DIR/data/postmaster.pid")"
    fi
    case "$STATE_DIR" in
        */"$DIR_PREFIX"*) ;;
        *) die "state file $STATE names '$STATE_DIR', not a directory this script made; remove it by hand" ;;
    esac
}

write_state() { printf '%s\n%s\n' "$1" "$2" > "$STATE.tmp" && mv "$STATE.tmp" "$STATE"; }

# running: true if the state file names a live postmaster of its directory.
running() {
    read_state
    [[ -n "$STATE_DIR" ]] && pid_matches "$STATE_PID" "$STATE_DIR/data"
}

# The server binaries: installed from Debian's package when missing.
install_server() {
    if [[ -x "$PG_BIN/postgres" ]]; then return 0; fi
    if [[ -n "${PHASEO_INTEROP_POSTGRES_BIN:-}" ]]; then
        die "no postgres in PHASEO_INTEROP_POSTGRES_BIN=$PG_BIN"
    fi
    (( EUID == 0 )) || die "PostgreSQL $PG_MAJOR is not installed ($PG_BIN/postgres is missing); as root: apt-get install postgresql-$PG_MAJOR"
    require_cmd apt-get "install PostgreSQL $PG_MAJOR yourself and set PHASEO_INTEROP_POSTGRES_BIN to its bin directory"
    apt_install "postgresql-$PG_MAJOR"
    [[ -x "$PG_BIN/postgres" ]] || die "postgresql-$PG_MAJOR is installed but $PG_BIN/postgres is not there"
}

# _stop_locked: stop the cluster of the state file and delete its directory.
_stop_locked() {
    read_state
    if [[ -z "$STATE_DIR" ]]; then
        log "postgres on port $PORT: no state file $STATE (not running)"; return 0
    fi
    local pid="$STATE_PID" dir="$STATE_DIR"
    if pid_matches "$pid" "$dir/data"; then
        as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >&2 ||
            log "postgres on port $PORT: pg_ctl stop failed"
        local signal _
        for signal in QUIT KILL; do
            pid_matches "$pid" "$dir/data" || break
            log "postgres on port $PORT: pid $pid still running; sending SIG$signal"
            kill "-$signal" "$pid" 2>/dev/null || true
            for _ in $(seq 1 100); do
                pid_matches "$pid" "$dir/data" || break
                sleep 0.1
            done
        done
    elif [[ -n "$pid" ]]; then
        log "postgres on port $PORT: pid $pid is not running or is not ours; cleaning up"
    fi
    if [[ -f "$dir/server.log" ]]; then cp "$dir/server.log" "$LOGFILE" || true; fi
    rm -rf -- "$dir"
    rm -f "$STATE"
    log "stopped postgres on port $PORT${pid:+ (pid $pid)}; removed $dir; server log kept in $LOGFILE"
}

# _start_cluster DIR: initdb, start and create the database; 1 on failure.
_start_cluster() {
    local dir="$1"
    if (( EUID == 0 )); then
        id -u "$PG_OS_USER" >/dev/null 2>&1 ||
            { log "there is no '$PG_OS_USER' OS user to run the server as"; return 1; }
        chown "$PG_OS_USER": "$dir" || return 1
    fi
    chmod 700 "$dir" || return 1
    as_pg test -w "$dir" ||
        { log "the $PG_OS_USER user cannot write $dir: point TMPDIR to a directory it can reach"; return 1; }
    log "initdb $dir/data (PostgreSQL $("$PG_BIN/postgres" --version | awk '{ print $3 }'))"
    if ! as_pg "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C \
        > "$dir/initdb.log" 2>&1; then
        tail -n 30 "$dir/initdb.log" >&2; return 1
    fi
    cat >> "$dir/data/postgresql.conf" <<CONF

# --- phaseo-agent interop: private cluster (interop/postgres.sh) ---
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$dir'
# The store's tests count how often a statement is planned.
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track_planning = on
CONF
    log "starting postgres on 127.0.0.1:$PORT (log $dir/server.log, kept in $LOGFILE at stop)"
    # 9>&-: the server must not inherit with_lock's lock, or it holds it until it stops.
    if ! as_pg "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start > /dev/null 9>&-; then
        tail -n 30 "$dir/server.log" >&2 || true; return 1
    fi
    local pid
    pid="$(head -n1 "$dir/data/postmaster.pid")" || return 1
    write_state "$pid" "$dir" || return 1
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres "$DATABASE" >&2 || return 1
    log "postgres ready: pid $pid, dir $dir, database $DATABASE"
}

_start_locked() {
    if running; then
        log "postgres already running on port $PORT (pid $STATE_PID, dir $STATE_DIR)"
        url; return 0
    fi
    if [[ -n "$STATE_DIR" ]]; then
        log "postgres on port $PORT: cleaning up after a run that did not stop it"
        _stop_locked
    fi
    port_in_use "$PORT" && die "port $PORT is already in use by another process (set PHASEO_INTEROP_POSTGRES_PORT)"
    install_server
    local version
    version="$("$PG_BIN/postgres" --version)"
    [[ "$version" == *" $PG_MAJOR."* ]] || die "$PG_BIN/postgres is '$version', not PostgreSQL $PG_MAJOR"

    local dir
    dir="$(mktemp -d "${TMPDIR:-/tmp}/${DIR_PREFIX}XXXXXX")"
    # Recorded before anything runs in it, so that stop always finds it.
    write_state "" "$dir"
    # An interrupt while starting must not leave the server or the directory behind.
    trap '_stop_locked; exit 130' INT TERM
    if ! _start_cluster "$dir"; then
        _stop_locked
        die "postgres did not come up on port $PORT"
    fi
    trap - INT TERM
    url
}

case "$CMD" in
    start) with_lock postgres _start_locked ;;
    stop) with_lock postgres _stop_locked ;;
    url) url ;;
    status)
        if running; then
            log "postgres running on port $PORT: pid $STATE_PID, dir $STATE_DIR"
        else
            log "postgres not running on port $PORT"; exit 1
        fi
        ;;
    *) die "usage: $0 start|stop|url|status [PORT]  (PORT default \$PHASEO_INTEROP_POSTGRES_PORT or 15432)" ;;
esac
