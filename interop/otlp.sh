#!/usr/bin/env bash
# An OTLP/HTTP receiver on 127.0.0.1 (interop/otlp_receiver.py), for the export tests
# (tests/it/interop/otlp.rs and the traced run of tests/it/interop/llama.rs).
#
#   interop/otlp.sh start  [PORT]   prints the endpoint's base URL http://127.0.0.1:PORT
#   interop/otlp.sh dump   [PORT]   prints the dump file's path (whether or not it runs)
#   interop/otlp.sh status [PORT]   exit 0 if our receiver on PORT runs, 1 if not
#   interop/otlp.sh stop   [PORT]
#
# PORT defaults to $PHASEO_INTEROP_OTLP_PORT, else 14318. The receiver takes protobuf bodies on
# /v1/traces and /v1/metrics, decodes them with the official `opentelemetry-proto` (PyPI, pinned
# below, in the venv `venv-otlp` of the cache) and appends one JSON line per span and per metric
# point to $PHASEO_INTEROP_CACHE/run/otlp.PORT.jsonl, which `start` empties. It runs detached
# (setsid, stdin from /dev/null), bound to 127.0.0.1 only, with its PID in run/otlp.PORT.pid and
# its log in run/otlp.PORT.log; `stop` stops exactly that PID, and only if its command line still
# names the receiver and the port (SIGTERM, SIGKILL after 10 s). `start` on a running receiver
# prints its URL, `stop` on a stopped one does nothing.
# Env: OTLP_PROTO_VERSION (1.45.2), PROTOBUF_VERSION (7.36.2)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CMD="${1:-}"
PORT="${2:-${PHASEO_INTEROP_OTLP_PORT:-14318}}"
check_port "$PORT"
OTLP_PROTO_VERSION="${OTLP_PROTO_VERSION:-1.45.2}"
PROTOBUF_VERSION="${PROTOBUF_VERSION:-7.36.2}"
PIDFILE="$INTEROP_RUN/otlp.$PORT.pid"
LOGFILE="$INTEROP_RUN/otlp.$PORT.log"
DUMP="$INTEROP_RUN/otlp.$PORT.jsonl"
PATTERN="otlp_receiver.py --port $PORT"

url() { printf 'http://127.0.0.1:%s\n' "$PORT"; }

running() { [[ -f "$PIDFILE" ]] && pid_matches "$(<"$PIDFILE")" "$PATTERN"; }

start() {
    if running; then
        log "otlp receiver already running on port $PORT (pid $(<"$PIDFILE"))"
        url; return 0
    fi
    if port_in_use "$PORT"; then die "port $PORT is in use by another program"; fi
    local venv pid
    venv="$(ensure_venv venv-otlp "opentelemetry-proto==$OTLP_PROTO_VERSION" "protobuf==$PROTOBUF_VERSION")"
    : > "$DUMP"
    pid="$(start_detached "$PIDFILE" "$LOGFILE" \
        "$venv/bin/python" "$INTEROP_DIR/otlp_receiver.py" --port "$PORT" --dump "$DUMP")"
    if ! wait_http "http://127.0.0.1:$PORT/health" "$pid" 30 "$LOGFILE"; then
        stop_pidfile "$PIDFILE" "$PATTERN" "otlp receiver on port $PORT"
        die "the otlp receiver did not start (log: $LOGFILE)"
    fi
    log "otlp receiver on port $PORT (pid $pid), dump $DUMP"
    url
}

case "$CMD" in
    start) start ;;
    dump) printf '%s\n' "$DUMP" ;;
    status) running ;;
    stop) stop_pidfile "$PIDFILE" "$PATTERN" "otlp receiver on port $PORT" ;;
    *) die "usage: interop/otlp.sh start|dump|status|stop [PORT]" ;;
esac
