# shellcheck shell=bash
# Shared helpers for the interop suite scripts (interop/*.sh).
# Sourced, not run. Nothing here writes into the repository: everything that
# is installed, downloaded or built goes under $INTEROP_CACHE, and PID files
# and server logs under $INTEROP_CACHE/run.
#
#   PHASEO_INTEROP_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/phaseo-agent/interop)
#   PHASEO_INTEROP_PYTHON python3 used to create venvs (default python3, needs >= 3.10)

set -euo pipefail
shopt -s inherit_errexit

# shellcheck disable=SC2034 # used by the scripts that source this file
INTEROP_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
INTEROP_CACHE="${PHASEO_INTEROP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phaseo-agent/interop}"
INTEROP_RUN="$INTEROP_CACHE/run"
INTEROP_PYTHON="${PHASEO_INTEROP_PYTHON:-python3}"
mkdir -p "$INTEROP_CACHE" "$INTEROP_RUN"
export PHASEO_INTEROP_CACHE="$INTEROP_CACHE"

log() { printf '[interop] %s\n' "$*" >&2; }
die() { printf '[interop] ERROR: %s\n' "$*" >&2; exit 1; }

# require_cmd CMD HINT: fail with HINT if CMD is not on PATH.
require_cmd() {
    command -v "$1" >/dev/null 2>&1 || die "'$1' not found: $2"
}

# with_lock NAME CMD...: run CMD holding an exclusive flock on
# $INTEROP_CACHE/.lock-NAME, so that concurrent runs do not install into the
# same directory at once. Waits up to 30 min (a llama wheel build).
with_lock() {
    local name="$1"; shift
    local lockfile="$INTEROP_CACHE/.lock-$name"
    (
        flock -w 1800 9 || die "timed out waiting for lock $lockfile"
        "$@"
    ) 9>"$lockfile"
}

# stamp ARGS...: short hash of the arguments (the marker of an install).
stamp() { printf '%s' "$*" | sha256sum | cut -c1-16; }

# ensure_venv NAME PIP_ARGS...: make $INTEROP_CACHE/NAME a venv holding
# `pip install PIP_ARGS`. A marker file .phaseo-ok records a hash of the
# arguments: the venv is rebuilt from scratch when they change or when an
# earlier install did not finish. Prints the venv path on stdout.
ensure_venv() {
    local name="$1"; shift
    local venv="$INTEROP_CACHE/$name"
    local st; st="$(stamp "$*")"
    if [[ -x "$venv/bin/python" && -f "$venv/.phaseo-ok" && "$(<"$venv/.phaseo-ok")" == "$st" ]]; then
        printf '%s\n' "$venv"; return 0
    fi
    with_lock "venv-$name" _ensure_venv_locked "$venv" "$st" "$@" >&2
    printf '%s\n' "$venv"
}
_ensure_venv_locked() {
    local venv="$1" st="$2"; shift 2
    if [[ -x "$venv/bin/python" && -f "$venv/.phaseo-ok" && "$(<"$venv/.phaseo-ok")" == "$st" ]]; then
        return 0
    fi
    require_cmd "$INTEROP_PYTHON" "install python3 >= 3.10 with the venv module (or set PHASEO_INTEROP_PYTHON)"
    log "creating venv $venv (pip install $*)"
    rm -rf "$venv"
    "$INTEROP_PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
    printf '%s' "$st" > "$venv/.phaseo-ok"
}

# ensure_npm NAME SPEC...: `npm install SPEC...` into $INTEROP_CACHE/node/NAME
# (same marker scheme as ensure_venv). Prints the prefix on stdout.
ensure_npm() {
    local name="$1"; shift
    local prefix="$INTEROP_CACHE/node/$name"
    local st; st="$(stamp "$*")"
    if [[ -f "$prefix/.phaseo-ok" && "$(<"$prefix/.phaseo-ok")" == "$st" ]]; then
        printf '%s\n' "$prefix"; return 0
    fi
    with_lock "npm-$name" _ensure_npm_locked "$prefix" "$st" "$@" >&2
    printf '%s\n' "$prefix"
}
_ensure_npm_locked() {
    local prefix="$1" st="$2"; shift 2
    if [[ -f "$prefix/.phaseo-ok" && "$(<"$prefix/.phaseo-ok")" == "$st" ]]; then return 0; fi
    require_cmd npm "install Node.js >= 20.15 with npm"
    log "npm install into $prefix: $*"
    rm -rf "$prefix"; mkdir -p "$prefix"
    printf '{"name":"phaseo-interop-%s","private":true}\n' "$(basename "$prefix")" > "$prefix/package.json"
    (cd "$prefix" && npm install --no-audit --no-fund --loglevel=error "$@" >&2)
    printf '%s' "$st" > "$prefix/.phaseo-ok"
}

# npm_bin PREFIX PACKAGE [BIN]: absolute path of the JS file behind a package's
# bin entry, to run it as `node FILE` (then the PID is the server itself, not
# an npx/npm wrapper).
npm_bin() {
    node -e '
        const path = require("path");
        const [dir, pkg, bin] = process.argv.slice(1);
        const root = path.join(dir, "node_modules", pkg);
        let b = require(path.join(root, "package.json")).bin;
        if (typeof b !== "string") b = bin ? b[bin] : Object.values(b || {})[0];
        if (!b) { console.error("no bin " + bin + " in " + pkg); process.exit(1); }
        console.log(path.resolve(root, b));
    ' "$1" "$2" "${3:-}"
}

# apt_install PACKAGE...: install Debian packages with apt-get (no recommends, no prompts);
# when that fails, `apt-get update` and try once more. The caller checks it runs as root.
apt_install() {
    local install=(apt-get install -y -q --no-install-recommends "$@")
    log "installing Debian's $*: ${install[*]}"
    if ! DEBIAN_FRONTEND=noninteractive "${install[@]}" >&2; then
        log "apt-get install failed; running apt-get update and trying again"
        DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive "${install[@]}" >&2
    fi
}

# port_in_use PORT: true if something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# check_port PORT: die unless PORT is a number.
check_port() {
    [[ "$1" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$1'"
}

# pid_matches PID PATTERN: true if PID is alive and its command line contains
# PATTERN (so that a recycled PID is never killed).
pid_matches() {
    local pid="$1" pattern="$2"
    [[ "$pid" =~ ^[0-9]+$ && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$pattern"
}

# start_detached PIDFILE LOGFILE CMD...: run CMD in its own session (setsid),
# stdin from /dev/null, stdout+stderr appended to LOGFILE; write CMD's own PID
# to PIDFILE and print it. The PID is written by a shell that then execs CMD,
# so it is right whether or not setsid had to fork.
start_detached() {
    local pidfile="$1" logfile="$2"; shift 2
    : > "$logfile"
    rm -f "$pidfile"
    # shellcheck disable=SC2016 # $$ and $0 expand in the inner shell
    setsid bash -c 'printf "%s\n" "$$" > "$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' \
        "$pidfile" "$@" < /dev/null >> "$logfile" 2>&1 &
    local _
    for _ in $(seq 1 100); do
        [[ -s "$pidfile" ]] && break
        sleep 0.05
    done
    [[ -s "$pidfile" ]] || die "could not start $1 (no pid file $pidfile)"
    cat "$pidfile"
}

# wait_http URL PID TIMEOUT_S LOGFILE: poll URL until it answers 2xx. Fails
# early, with the tail of LOGFILE, if PID exits; fails after TIMEOUT_S.
wait_http() {
    local url="$1" pid="$2" timeout="$3" logfile="$4"
    local deadline=$(( SECONDS + timeout ))
    while (( SECONDS < deadline )); do
        if ! kill -0 "$pid" 2>/dev/null; then
            log "pid $pid exited during startup; last lines of $logfile:"
            tail -n 30 "$logfile" >&2 || true
            return 1
        fi
        if curl -fsS -m 2 -o /dev/null "$url" 2>/dev/null; then return 0; fi
        sleep 0.3
    done
    log "timed out after ${timeout}s waiting for $url; last lines of $logfile:"
    tail -n 30 "$logfile" >&2 || true
    return 1
}

# stop_pidfile PIDFILE PATTERN NAME: stop exactly the PID in PIDFILE, and only
# if its command line still contains PATTERN: SIGTERM, then SIGKILL after
# 10 s. Removes PIDFILE. Not running is not an error.
stop_pidfile() {
    local pidfile="$1" pattern="$2" name="$3"
    if [[ ! -f "$pidfile" ]]; then
        log "$name: no pid file $pidfile (not running)"; return 0
    fi
    local pid; pid="$(<"$pidfile")"
    if ! pid_matches "$pid" "$pattern"; then
        log "$name: pid $pid is not running or is not '$pattern'; removing $pidfile"
        rm -f "$pidfile"; return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local _
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name: pid $pid ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    log "stopped $name (pid $pid)"
}
