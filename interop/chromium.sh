#!/usr/bin/env bash
# Headless Chromium behind a WebDriver server (chromedriver) on 127.0.0.1, for the
# approval inbox's browser tests (tests/it/interop/inbox_browser.rs).
#
#   interop/chromium.sh install         installs Debian's chromium and chromium-driver where missing
#   interop/chromium.sh start  [PORT]   prints the WebDriver URL http://127.0.0.1:PORT
#   interop/chromium.sh url    [PORT]   prints that URL (whether or not the driver runs)
#   interop/chromium.sh status [PORT]   exit 0 if our chromedriver on PORT runs, 1 if not
#   interop/chromium.sh stop   [PORT]
#
# PORT defaults to $PHASEO_INTEROP_CHROMEDRIVER_PORT, else 19515. `start` installs first
# when needed, then runs `chromedriver --port=PORT --allowed-ips=127.0.0.1` detached
# (setsid, stdin from /dev/null) and waits for its /status to answer. chromedriver binds
# loopback only and starts a browser per WebDriver session; the tests ask for
# `--headless=new --no-sandbox --disable-gpu --window-size=1280,900` (no sandbox: as root,
# Chromium refuses to start with one). The browser chromedriver starts is Debian's
# /usr/bin/chromium, or $PHASEO_INTEROP_CHROMIUM_BIN, which the tests pass on as
# `goog:chromeOptions.binary`.
#
# Binaries: $PHASEO_INTEROP_CHROMEDRIVER_BIN (default: chromedriver on PATH). When it is
# missing and that variable is unset, `install` (and `start`) installs Debian's `chromium`
# and `chromium-driver` with apt-get (needs root; `apt-get update` first only if the install
# fails), and fails loudly otherwise.
#
# PID file and log: $PHASEO_INTEROP_CACHE/run/chromedriver.PORT.{pid,log}. `stop` stops
# exactly that PID, and only if its command line still names chromedriver and the port
# (SIGTERM, SIGKILL after 10 s); the browsers it started end with their sessions. `start`
# on a running driver prints its URL, `stop` on a stopped one does nothing.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CMD="${1:-}"
PORT="${2:-${PHASEO_INTEROP_CHROMEDRIVER_PORT:-19515}}"
check_port "$PORT"
PIDFILE="$INTEROP_RUN/chromedriver.$PORT.pid"
LOGFILE="$INTEROP_RUN/chromedriver.$PORT.log"
PATTERN="--port=$PORT"
PACKAGES=(chromium chromium-driver)

url() { printf 'http://127.0.0.1:%s\n' "$PORT"; }

driver_bin() {
    if [[ -n "${PHASEO_INTEROP_CHROMEDRIVER_BIN:-}" ]]; then
        printf '%s\n' "$PHASEO_INTEROP_CHROMEDRIVER_BIN"
    else
        command -v chromedriver || true
    fi
}

browser_bin() { printf '%s\n' "${PHASEO_INTEROP_CHROMIUM_BIN:-/usr/bin/chromium}"; }

# running: true if the PID file names a live chromedriver on PORT.
running() {
    [[ -f "$PIDFILE" ]] && pid_matches "$(<"$PIDFILE")" "$PATTERN" &&
        pid_matches "$(<"$PIDFILE")" chromedriver
}

_install_locked() {
    local driver browser
    driver="$(driver_bin)"
    browser="$(browser_bin)"
    if [[ -n "$driver" && -x "$driver" && -x "$browser" ]]; then return 0; fi
    if [[ -n "${PHASEO_INTEROP_CHROMEDRIVER_BIN:-}" || -n "${PHASEO_INTEROP_CHROMIUM_BIN:-}" ]]; then
        die "chromedriver '${driver:-(none)}' or chromium '$browser' is missing (PHASEO_INTEROP_CHROMEDRIVER_BIN / PHASEO_INTEROP_CHROMIUM_BIN are set, so nothing is installed)"
    fi
    (( EUID == 0 )) || die "Chromium and its WebDriver server are not installed (no chromedriver on PATH, or no $browser); as root: apt-get install ${PACKAGES[*]}"
    require_cmd apt-get "install Chromium and chromedriver yourself and set PHASEO_INTEROP_CHROMEDRIVER_BIN and PHASEO_INTEROP_CHROMIUM_BIN"
    apt_install "${PACKAGES[@]}"
    driver="$(driver_bin)"
    [[ -n "$driver" && -x "$driver" ]] || die "${PACKAGES[*]} installed, but there is no chromedriver on PATH"
    [[ -x "$browser" ]] || die "${PACKAGES[*]} installed, but $browser is not there"
}

install() {
    with_lock chromium _install_locked
    log "$("$(driver_bin)" --version); $("$(browser_bin)" --version 2>/dev/null || echo "chromium: version unknown")"
}

_stop() { stop_pidfile "$PIDFILE" "$PATTERN" "chromedriver on port $PORT"; }

start() {
    if running; then
        log "chromedriver already running on port $PORT (pid $(<"$PIDFILE"))"
        url; return 0
    fi
    rm -f "$PIDFILE"
    port_in_use "$PORT" && die "port $PORT is already in use by another process (set PHASEO_INTEROP_CHROMEDRIVER_PORT)"
    install
    local pid
    log "starting chromedriver on 127.0.0.1:$PORT (log $LOGFILE)"
    pid="$(start_detached "$PIDFILE" "$LOGFILE" "$(driver_bin)" \
        "--port=$PORT" --allowed-ips=127.0.0.1)"
    # An interrupt while waiting must not leave the driver behind.
    trap '_stop; exit 130' INT TERM
    if ! wait_http "http://127.0.0.1:$PORT/status" "$pid" 30 "$LOGFILE"; then
        _stop
        die "chromedriver did not come up"
    fi
    trap - INT TERM
    log "chromedriver ready: pid $pid"
    url
}

case "$CMD" in
    install) install ;;
    start) start ;;
    stop) _stop ;;
    url) url ;;
    status)
        if running; then
            log "chromedriver running on port $PORT: pid $(<"$PIDFILE")"
        else
            log "chromedriver not running on port $PORT"; exit 1
        fi
        ;;
    *) die "usage: $0 install|start|stop|url|status [PORT]  (PORT default \$PHASEO_INTEROP_CHROMEDRIVER_PORT or 19515)" ;;
esac
