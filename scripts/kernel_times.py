"""Per-kernel GPU time of the native program, from timestamp queries (each dispatch in a compute
pass of its own), for the real model's shapes on a program cut to --layers layers (every layer
does the same work): a prefill of --prompt tokens in the program's chunks, and a decode step at
--context keys (the short sequences' too, where the program has them). Where a device has no
timestamp queries it says so. The least of --repeats runs is kept (a shared machine disturbs
some). Times are the device's: on lavapipe or SwiftShader relative only.

    PYTHONPATH=py python3 scripts/kernel_times.py [MODEL] [--layers 2] [--prompt 300] [--context 256]
        [--n-ctx 512] [--repeats 3] [--kv F32|F16] [--gemm matmul|matmul_plain] [--json OUT]
"""

import argparse
import json
import struct
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", help="a .gguf file or a Hugging Face folder (default: the fetched GGUF)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--prompt", type=int, default=300)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--n-ctx", type=int, default=512)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kv", choices=["F32", "F16"])
    p.add_argument("--gemm", help="the prefill GEMM (chatlens.gpu.kernels.GEMMS; default kernels.GEMM)")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args(argv)

    import wgpu

    from chatlens.gpu import program, weight_plan
    from chatlens.host import native_gpu as native
    from chatlens.host.native_gpu import _file_reader
    from chatlens.host.fetch import resolve_model

    path = resolve_model(args.model)
    plan = weight_plan(path)
    n_layers = plan["config"]["n_layers"]
    plan["config"]["n_layers"] = layers = min(args.layers, n_layers)
    # the cut layers' tensors go too: the program refuses weights the config has no place for
    plan["tensors"] = {name: t for name, t in plan["tensors"].items()
                       if not name.startswith("model.layers.") or int(name.split(".")[2]) < layers}
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    info = native.adapter_info(adapter)
    if "timestamp-query" not in info["features"]:
        print(f"{info['name']} has no timestamp queries: no per-kernel times", file=sys.stderr)
        return 1
    features = [f for f in ("subgroup",) if f in info["features"]] + ["timestamp-query"]
    limits = {native._kebab(k): info["limits"][k] for k in native.USED_LIMITS if k in info["limits"]}
    device = adapter.request_device_sync(required_features=features, required_limits=limits)
    prog = program.build_program(plan, args.n_ctx, info["features"], info["limits"], kv=args.kv, gemm=args.gemm)
    meta = prog["meta"]
    ex = native.NativeExecutor(device, prog, _file_reader(path if path.is_dir() else path.parent))
    labels = {name: [d["label"] for d in seq] for name, seq in prog["sequences"].items()}
    queries = device.create_query_set(type="timestamp", count=4096)
    resolved = device.create_buffer(size=8 * 4096, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)

    def timed(sequences, params):
        """[(label, ns)] of every dispatch of the sequences."""
        ex.write(meta["step_buffer"], params)
        encoder = device.create_command_encoder()
        order = []
        for name in sequences:
            for (pipeline, group, (x, y, z)), label in zip(ex.sequences[name], labels[name]):
                i = len(order)
                compute = encoder.begin_compute_pass(timestamp_writes={
                    "query_set": queries, "beginning_of_pass_write_index": 2 * i, "end_of_pass_write_index": 2 * i + 1})
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, group)
                compute.dispatch_workgroups(x, y, z)
                compute.end()
                order.append(label)
        encoder.resolve_query_set(queries, 0, 2 * len(order), resolved, 0)
        device.queue.submit([encoder.finish()])
        ts = struct.unpack(f"<{2 * len(order)}Q", device.queue.read_buffer(resolved, 0, 16 * len(order)))
        return [(label, ts[2 * j + 1] - ts[2 * j]) for j, label in enumerate(order)]

    def least(runs):
        return [(label, min(r[i][1] for r in runs)) for i, (label, _) in enumerate(runs[0])]

    ids = [(17 * i + 5) % (plan["config"]["vocab_size"] - 100) + 100 for i in range(args.prompt)]
    chunk = meta["chunk"]

    def prefill():
        rows = []
        for at in range(0, len(ids), chunk):
            part = ids[at:at + chunk]
            body = "decode" if len(part) == 1 else "prefill"
            rows += timed([body] + (["head"] if at + chunk >= len(ids) else []), program.step_params(meta, at, part))
        return rows

    short = meta.get("short")
    runs = {"prefill": least([prefill() for _ in range(args.repeats)]),
            f"decode at {args.context} keys": least([timed(["decode", "head"], program.step_params(meta, args.context, [ids[0]]))
                                                     for _ in range(args.repeats)])}
    if short:
        keys = min(short["keys"], args.context) - 1
        runs[f"decode_short at {keys + 1} keys"] = least([timed([short["decode"], "head"], program.step_params(meta, keys, [ids[0]]))
                                                          for _ in range(args.repeats)])
    out = {"adapter": info["name"], "kv": meta["kv"], "gemm": meta["gemm"], "layers_run": layers, "n_layers": n_layers, "chunk": chunk, "runs": {}}
    print(f"{info['name']}: {layers} of {n_layers} layers, {meta['kv']} cache, {meta['gemm']}, chunks of {chunk}; ms, "
          f"least of {args.repeats}")
    for name, rows in runs.items():
        per_label = {}
        for label, ns in rows:
            per_label[label] = per_label.get(label, 0) + ns / 1e6
        fixed = sum(ms for label, ms in per_label.items() if label.startswith("embed") or label == "argmax" or "store" in label)
        layer = (sum(per_label.values()) - fixed) / layers
        full = fixed + n_layers * layer
        out["runs"][name] = {"ms_per_label": per_label, "ms_per_layer": layer, "ms_full_model": full}
        print(f"{name}: {layer:.3f} ms a layer, {full:.1f} ms for all {n_layers} layers"
              + (f" ({args.prompt / full * 1000:.1f} tokens/s)" if name == "prefill" else ""))
        for label, ms in per_label.items():
            print(f"  {label:32s} {ms:10.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
