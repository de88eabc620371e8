#!/usr/bin/env bash
# The interop suite: phaseo-agent against real outside software, offline
# after the first run. Called by .ci/run after the unit tests.
#
#   interop/run.sh
#
# Steps (each prints one PASS/FAIL/SKIP line with its time; a summary of all
# of them comes at the end):
#   1. aimock start   the OpenAI/Anthropic wire-format mock, fixtures interop/fixtures/aimock
#   2. llama start    llama-cpp-python serving SmolLM2-135M-Instruct (real model, tool calling)
#   3. postgres start a private PostgreSQL 15 cluster (interop/postgres.sh: initdb in a temporary
#                     directory, 127.0.0.1 only, database `phaseo`; installs Debian's
#                     postgresql-15 with apt-get when missing). Never skipped.
#   4. chromium start headless Chromium's WebDriver server (interop/chromium.sh: chromedriver on
#                     127.0.0.1 only; installs Debian's chromium and chromium-driver with apt-get
#                     when missing), for the approval inbox's browser tests. Never skipped.
#  4b. otlp start     an OTLP/HTTP receiver (interop/otlp.sh: interop/otlp_receiver.py, PyPI
#                     opentelemetry-proto, 127.0.0.1 only) writing what it decodes to a dump file,
#                     for the export tests (tests/it/interop/otlp.rs, the traced llama run)
#   5. mcp everything install the reference MCP server (npm @modelcontextprotocol/server-everything),
#                     which tests/it/interop/mcp_client.rs starts as its client's child process
#   6. cargo interop  cargo test --all-features --no-fail-fast -p phaseo-agent-tests --test it -- --ignored --test-threads=1 interop::
#                     with PHASEO_INTEROP_AIMOCK_URL, PHASEO_INTEROP_LLAMA_URL,
#                     PHASEO_INTEROP_POSTGRES_URL, PHASEO_INTEROP_WEBDRIVER_URL,
#                     PHASEO_INTEROP_OTLP_URL and PHASEO_INTEROP_OTLP_DUMP (the receiver's base URL
#                     and its dump file) and PHASEO_INTEROP_MCP_EVERYTHING (the server's entry
#                     point, run as `node PATH stdio`) set
#   7. strict schemas interop/strict_check.py tests/golden/dialects/openai_strict_all.json
#   8. mcp build      cargo build --example mcp_server (our MCP server, served on stdio)
#   9. mcp python     interop/mcp_server.sh python BINARY: the official Python MCP client
#                     (PyPI mcp) initialises it, calls every tool, gets progress, cancels a
#                     long call (the tool observes it), sees isError for bad arguments
#  10. mcp inspector  interop/mcp_server.sh inspector BINARY: the MCP Inspector CLI lists its tools
#  11. graphile latency interop/graphile.sh latency URL: graphile-worker (npm, pinned) measured on
#                     the same cluster, from a job added to its task started (one worker,
#                     concurrency 1), printed beside the `[workers] latency` lines that
#                     tests/it/interop/workers_example.rs wrote into step 6's log for our workers.
#                     An npm install that fails, or a figure missing on either side, is a FAIL
# The servers this run started (aimock, llama, postgres, chromedriver, otlp) are stopped on exit,
# whatever happened; postgres's directory is deleted. Exit code 0 only if every
# step passed.
#
# Env:
#   PHASEO_INTEROP_AIMOCK_PORT  default 14310     PHASEO_INTEROP_LLAMA_PORT  default 18311
#   PHASEO_INTEROP_POSTGRES_PORT default 15432    PHASEO_INTEROP_CHROMEDRIVER_PORT default 19515
#   PHASEO_INTEROP_OTLP_PORT    default 14318
#   PHASEO_INTEROP_CACHE        where everything is installed (see interop/README.md)
#   PHASEO_INTEROP_SKIP_LLAMA=1 skip the model server and the tests in tests/it/interop/llama.rs.
#                               For local iteration ONLY: refused when CI is set.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPO="$(cd "$INTEROP_DIR/.." && pwd)"
cd "$REPO"
AIMOCK_PORT="${PHASEO_INTEROP_AIMOCK_PORT:-14310}"
LLAMA_PORT="${PHASEO_INTEROP_LLAMA_PORT:-18311}"
POSTGRES_PORT="${PHASEO_INTEROP_POSTGRES_PORT:-15432}"
CHROMEDRIVER_PORT="${PHASEO_INTEROP_CHROMEDRIVER_PORT:-19515}"
OTLP_PORT="${PHASEO_INTEROP_OTLP_PORT:-14318}"
STRICT_FILE="tests/golden/dialects/openai_strict_all.json"
SKIP_LLAMA="${PHASEO_INTEROP_SKIP_LLAMA:-}"
if [[ "$SKIP_LLAMA" == 0 ]]; then SKIP_LLAMA=""; fi
check_port "$AIMOCK_PORT"
check_port "$LLAMA_PORT"
check_port "$POSTGRES_PORT"
check_port "$CHROMEDRIVER_PORT"
check_port "$OTLP_PORT"
# Only the servers this run starts count; never a URL left in the environment.
unset PHASEO_INTEROP_AIMOCK_URL PHASEO_INTEROP_LLAMA_URL PHASEO_INTEROP_POSTGRES_URL \
    PHASEO_INTEROP_WEBDRIVER_URL PHASEO_INTEROP_MCP_EVERYTHING PHASEO_INTEROP_OTLP_URL \
    PHASEO_INTEROP_OTLP_DUMP

banner() {
    printf '\n[interop] %s\n' "################################################################" >&2
    local line
    for line in "$@"; do printf '[interop] ## %s\n' "$line" >&2; done
    printf '[interop] %s\n\n' "################################################################" >&2
}

if [[ -n "$SKIP_LLAMA" ]]; then
    if [[ -n "${CI:-}" ]]; then
        die "PHASEO_INTEROP_SKIP_LLAMA is set while CI=$CI: the model server may only be skipped for local iteration"
    fi
    banner "WARNING: PHASEO_INTEROP_SKIP_LLAMA=1: the real-model server is NOT started" \
        "and tests/it/interop/llama.rs is NOT run. Local iteration only: CI never skips it."
fi

# --- bookkeeping --------------------------------------------------------------
SUMMARY=()
FAILED=0
STARTED_AIMOCK=""   # set: stop it on exit
STARTED_LLAMA=""
STARTED_POSTGRES=""
STARTED_CHROMEDRIVER=""
STARTED_OTLP=""
AIMOCK_UP=""        # set: it answered
LLAMA_UP=""
POSTGRES_UP=""
CHROMEDRIVER_UP=""
OTLP_UP=""

# owned_unless_running PIDFILE VAR: set VAR=1 (stop that server on exit)
# unless PIDFILE names a live process, i.e. a server we did not start.
owned_unless_running() {
    if [[ -f "$1" ]] && kill -0 "$(<"$1")" 2>/dev/null; then return 0; fi
    printf -v "$2" '%s' 1
}

now() { printf '%s' "${EPOCHREALTIME/,/.}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# record STATUS NAME T0 [NOTE]: print and keep one summary line.
record() {
    local status="$1" name="$2" t0="$3" note="${4:-}"
    local line
    line="$(printf '%-4s %-16s %9s%s' "$status" "$name" "$(elapsed "$t0")" "${note:+  $note}")"
    SUMMARY+=("$line")
    if [[ "$status" == FAIL ]]; then FAILED=1; fi
    log "$line"
}

# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n "$STARTED_OTLP" ]]; then "$INTEROP_DIR/otlp.sh" stop "$OTLP_PORT" || true; fi
    if [[ -n "$STARTED_CHROMEDRIVER" ]]; then "$INTEROP_DIR/chromium.sh" stop "$CHROMEDRIVER_PORT" || true; fi
    if [[ -n "$STARTED_POSTGRES" ]]; then "$INTEROP_DIR/postgres.sh" stop "$POSTGRES_PORT" || true; fi
    if [[ -n "$STARTED_LLAMA" ]]; then "$INTEROP_DIR/llama.sh" stop "$LLAMA_PORT" || true; fi
    if [[ -n "$STARTED_AIMOCK" ]]; then "$INTEROP_DIR/aimock.sh" stop "$AIMOCK_PORT" || true; fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

SUITE_T0="$(now)"

# --- 1. aimock ----------------------------------------------------------------
t0="$(now)"
# Marked as ours before the start, so that an interrupt during the start still
# stops it; unless a server was already there (then start refuses, and it is
# not ours to stop).
owned_unless_running "$INTEROP_RUN/aimock.$AIMOCK_PORT.pid" STARTED_AIMOCK
if AIMOCK_URL="$("$INTEROP_DIR/aimock.sh" start "$AIMOCK_PORT" "$INTEROP_DIR/fixtures/aimock")"; then
    AIMOCK_UP=1
    export PHASEO_INTEROP_AIMOCK_URL="$AIMOCK_URL"
    record PASS "aimock start" "$t0" "$AIMOCK_URL"
else
    record FAIL "aimock start" "$t0" "log: $INTEROP_RUN/aimock.$AIMOCK_PORT.log"
fi

# --- 2. llama -----------------------------------------------------------------
t0="$(now)"
if [[ -n "$SKIP_LLAMA" ]]; then
    record SKIP "llama start" "$t0" "PHASEO_INTEROP_SKIP_LLAMA=1 (local iteration only)"
elif owned_unless_running "$INTEROP_RUN/llama.$LLAMA_PORT.pid" STARTED_LLAMA &&
    LLAMA_URL="$("$INTEROP_DIR/llama.sh" start "$LLAMA_PORT")"; then
    LLAMA_UP=1
    export PHASEO_INTEROP_LLAMA_URL="$LLAMA_URL"
    record PASS "llama start" "$t0" "$LLAMA_URL"
else
    record FAIL "llama start" "$t0" "log: $INTEROP_RUN/llama.$LLAMA_PORT.log"
fi

# start_reused STEP SCRIPT PORT STARTED_VAR UP_VAR URL_ENV LOGFILE: `SCRIPT start PORT`, whose
# URL is exported as URL_ENV; UP_VAR=1 when it started. A server already running on the port
# (another run's) is used but not ours to stop: STARTED_VAR=1 only if `SCRIPT status PORT` found
# none, before the start (so that an interrupt during the start still stops it).
start_reused() {
    local step="$1" script="$INTEROP_DIR/$2" port="$3" started="$4" up="$5" env="$6" logfile="$7"
    local t0 url
    t0="$(now)"
    if ! "$script" status "$port" 2>/dev/null; then printf -v "$started" '%s' 1; fi
    if url="$("$script" start "$port")"; then
        printf -v "$up" '%s' 1
        export "$env=$url"
        record PASS "$step" "$t0" "$url"
    else
        record FAIL "$step" "$t0" "see the lines above; log: $logfile"
    fi
}

# --- 3. postgres -----------------------------------------------------------------
start_reused "postgres start" postgres.sh "$POSTGRES_PORT" STARTED_POSTGRES POSTGRES_UP \
    PHASEO_INTEROP_POSTGRES_URL "$INTEROP_RUN/postgres.$POSTGRES_PORT.log"

# --- 4. chromedriver (headless Chromium over WebDriver) -------------------------
start_reused "chromium start" chromium.sh "$CHROMEDRIVER_PORT" STARTED_CHROMEDRIVER \
    CHROMEDRIVER_UP PHASEO_INTEROP_WEBDRIVER_URL "$INTEROP_RUN/chromedriver.$CHROMEDRIVER_PORT.log"

# --- 4b. OTLP receiver (its dump file is where the tests read what it received) ----
start_reused "otlp start" otlp.sh "$OTLP_PORT" STARTED_OTLP OTLP_UP \
    PHASEO_INTEROP_OTLP_URL "$INTEROP_RUN/otlp.$OTLP_PORT.log"
export PHASEO_INTEROP_OTLP_DUMP="$("$INTEROP_DIR/otlp.sh" dump "$OTLP_PORT")"

# --- 5. server-everything (started and ended by the tests' MCP client) ---------
t0="$(now)"
if EVERYTHING_JS="$("$INTEROP_DIR/mcp_everything.sh" install)"; then
    export PHASEO_INTEROP_MCP_EVERYTHING="$EVERYTHING_JS"
    record PASS "mcp everything" "$t0" "node $EVERYTHING_JS stdio"
else
    record FAIL "mcp everything" "$t0" "could not install @modelcontextprotocol/server-everything"
fi

# --- 6. the Rust interop tests --------------------------------------------------
t0="$(now)"
# The interop tests are the module `interop` of the `it` test binary (tests/it/interop/), ignored
# in a plain `cargo test`; the filter `interop::` runs only them.
TEST_ARGS=(-p phaseo-agent-tests --test it)
FILTER=(interop::)
if [[ -n "$SKIP_LLAMA" ]]; then FILTER+=(--skip interop::llama); fi
if [[ -z "$AIMOCK_UP" || -z "$POSTGRES_UP" || -z "$CHROMEDRIVER_UP" || -z "$OTLP_UP" || ( -z "$LLAMA_UP" && -z "$SKIP_LLAMA" ) ]]; then
    record FAIL "cargo interop" "$t0" "not run: a server did not start"
else
    mkdir -p target
    CARGO_LOG="target/interop-cargo.log"
    log "cargo test --all-features --no-fail-fast ${TEST_ARGS[*]} -- --ignored --test-threads=1 ${FILTER[*]}"
    set +e
    cargo test --all-features --no-fail-fast "${TEST_ARGS[@]}" \
        -- --ignored --test-threads=1 "${FILTER[@]}" 2>&1 \
        | tee "$CARGO_LOG"
    rc="${PIPESTATUS[0]}"
    set -e
    counts="$(awk '/^test result:/ { p += $4; f += $6 } END { printf "%d passed, %d failed", p, f }' "$CARGO_LOG")"
    if [[ "$rc" == 0 ]]; then
        record PASS "cargo interop" "$t0" "$counts"
    else
        record FAIL "cargo interop" "$t0" "$counts, cargo exit $rc (log: $CARGO_LOG)"
    fi
fi

# --- 7. strict-mode oracle on the golden schemas -------------------------------
t0="$(now)"
if [[ ! -f "$STRICT_FILE" ]]; then
    banner "FAIL: $STRICT_FILE does not exist." \
        "It holds {name: schema} for every schema phaseo-agent sends in OpenAI strict mode;" \
        "the strict-mode oracle cannot run without it."
    record FAIL "strict schemas" "$t0" "MISSING $STRICT_FILE"
elif "$INTEROP_DIR/strict_check.py" "$STRICT_FILE"; then
    record PASS "strict schemas" "$t0" "$STRICT_FILE"
else
    record FAIL "strict schemas" "$t0" "$STRICT_FILE: see the CHANGED/ERROR lines above"
fi

# --- 8-10. our MCP server against the official MCP clients -----------------------
t0="$(now)"
MCP_BINARY=""
if cargo build --quiet --example mcp_server; then
    TARGET_DIR="$(cargo metadata --format-version 1 --no-deps |
        "$INTEROP_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
    MCP_BINARY="$TARGET_DIR/debug/examples/mcp_server"
    record PASS "mcp build" "$t0" "$MCP_BINARY"
else
    record FAIL "mcp build" "$t0" "cargo build --example mcp_server failed"
fi
for client in python inspector; do
    t0="$(now)"
    if [[ -z "$MCP_BINARY" ]]; then
        record FAIL "mcp $client" "$t0" "not run: the example did not build"
    elif "$INTEROP_DIR/mcp_server.sh" "$client" "$MCP_BINARY"; then
        record PASS "mcp $client" "$t0"
    else
        record FAIL "mcp $client" "$t0" "see the lines above"
    fi
done

# --- 11. graphile-worker's latency, beside our workers' ---------------------------
t0="$(now)"
# The Rust test wrote its figures past the harness's capture, into step 6's log of this run.
WORKERS_LATENCY=""
if [[ -n "${CARGO_LOG:-}" && -f "$CARGO_LOG" ]]; then
    WORKERS_LATENCY="$(grep -F '[workers] latency' "$CARGO_LOG" || true)"
fi
# avg_of LINES PATTERN: the average (ms) on the line of LINES that contains PATTERN.
avg_of() { { grep -F "$2" <<<"$1" || true; } | sed -n 's/.*: avg \([0-9.]*\) ms.*/\1/p' | head -n 1; }
if [[ -z "$POSTGRES_UP" ]]; then
    record FAIL "graphile latency" "$t0" "not run: PostgreSQL did not start"
elif ! GRAPHILE_LATENCY="$("$INTEROP_DIR/graphile.sh" latency "$PHASEO_INTEROP_POSTGRES_URL")"; then
    record FAIL "graphile latency" "$t0" "interop/graphile.sh failed (npm install or the measurement): see the lines above"
else
    while IFS= read -r line; do log "$line"; done <<<"$(grep -F '[graphile] latency' <<<"$GRAPHILE_LATENCY" || true)"
    if [[ -n "$WORKERS_LATENCY" ]]; then
        while IFS= read -r line; do log "$line"; done <<<"$WORKERS_LATENCY"
    fi
    theirs="$(avg_of "$GRAPHILE_LATENCY" 'addJob returned -> task started')"
    ours="$(avg_of "$WORKERS_LATENCY" 'enqueue returned -> run started')"
    if [[ -z "$theirs" || -z "$ours" ]]; then
        record FAIL "graphile latency" "$t0" "a figure is missing: graphile '${theirs}', ours '${ours}' (ours comes from step 6's log: ${CARGO_LOG:-not run})"
    else
        record PASS "graphile latency" "$t0" "queued -> started, avg: graphile-worker ${theirs} ms, ours ${ours} ms"
    fi
fi

# --- summary (stdout) -----------------------------------------------------------
printf '\ninterop summary:\n'
for line in "${SUMMARY[@]}"; do printf '  %s\n' "$line"; done
if [[ -n "$SKIP_LLAMA" ]]; then
    printf '  WARNING: PHASEO_INTEROP_SKIP_LLAMA=1: the real-model part was skipped\n'
fi
if (( FAILED )); then verdict=FAILED; else verdict=passed; fi
printf 'interop: %s in %s (servers are stopped next)\n' "$verdict" "$(elapsed "$SUITE_T0")"
exit "$FAILED"
