#!/usr/bin/env bash
# aimock: a deterministic, fixture-driven mock of the OpenAI (and Anthropic)
# wire formats, @copilotkit/aimock, run on 127.0.0.1.
#
#   interop/aimock.sh start [PORT] [FIXTURE_DIR]   prints the base URL http://127.0.0.1:PORT/v1
#   interop/aimock.sh stop  [PORT]
#
# PORT defaults to 14310, FIXTURE_DIR to interop/fixtures/aimock. The server
# runs in strict mode (a request that matches no fixture gets HTTP 503
# "no_fixture_match"), with the fixtures validated at load time, and streams
# text and tool-call arguments in chunks of 8 characters (so a client must
# reassemble arguments split over several SSE deltas). It runs as
# `node <pkg>/dist/cli.js`, detached with setsid, so the PID file holds the
# server itself. Request journal: GET http://127.0.0.1:PORT/__aimock/journal.
#
# First use: `npm install @copilotkit/aimock@1.43.0` into the cache
# ($PHASEO_INTEROP_CACHE/node/aimock). PID file and log:
# $PHASEO_INTEROP_CACHE/run/aimock.PORT.{pid,log}.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

AIMOCK_VERSION="1.43.0"
CMD="${1:-}"
PORT="${2:-14310}"
check_port "$PORT"
PIDFILE="$INTEROP_RUN/aimock.$PORT.pid"
LOGFILE="$INTEROP_RUN/aimock.$PORT.log"
PATTERN="@copilotkit/aimock/dist/cli.js"

start() {
    local fixtures="${1:-$INTEROP_DIR/fixtures/aimock}"
    [[ -e "$fixtures" ]] || die "fixture path '$fixtures' does not exist"
    fixtures="$(cd "$(dirname "$fixtures")" && pwd)/$(basename "$fixtures")"
    if [[ -f "$PIDFILE" ]] && pid_matches "$(<"$PIDFILE")" "$PATTERN"; then
        die "aimock is already running on port $PORT (pid $(<"$PIDFILE")); run '$0 stop $PORT' first"
    fi
    rm -f "$PIDFILE"
    port_in_use "$PORT" && die "port $PORT is already in use by another process"
    require_cmd node "install Node.js >= 20.15"

    local prefix cli pid
    prefix="$(ensure_npm aimock "@copilotkit/aimock@$AIMOCK_VERSION")"
    cli="$(npm_bin "$prefix" @copilotkit/aimock llmock)"
    log "starting aimock $AIMOCK_VERSION on 127.0.0.1:$PORT, fixtures $fixtures (log $LOGFILE)"
    pid="$(start_detached "$PIDFILE" "$LOGFILE" node "$cli" \
        --host 127.0.0.1 --port "$PORT" --fixtures "$fixtures" \
        --strict --validate-on-load --chunk-size 8 --log-level info)"
    # An interrupt while waiting must not leave the server behind.
    trap 'stop_pidfile "$PIDFILE" "$PATTERN" "aimock on port $PORT"; exit 130' INT TERM
    if ! wait_http "http://127.0.0.1:$PORT/health" "$pid" 30 "$LOGFILE"; then
        stop_pidfile "$PIDFILE" "$PATTERN" "aimock on port $PORT"
        die "aimock did not come up"
    fi
    log "aimock ready: pid $pid; $(grep -m1 -i 'loaded' "$LOGFILE" || true)"
    printf 'http://127.0.0.1:%s/v1\n' "$PORT"
}

case "$CMD" in
    start) start "${3:-}" ;;
    stop) stop_pidfile "$PIDFILE" "$PATTERN" "aimock on port $PORT" ;;
    *) die "usage: $0 start [PORT] [FIXTURE_DIR] | stop [PORT]" ;;
esac
