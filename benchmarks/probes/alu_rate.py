"""Arithmetic rates a WGSL kernel reaches through wgpu-py (naga -> the driver), to know which units a
prefill matmul could gain from: f32 fma, f16 fma (vec4<f16>, shader-f16) and packed int8 dot products
(dot4I8Packed: one instruction where naga emits OpSDot, a dozen where it polyfills).

Run: python3 benchmarks/probes/alu_rate.py  -> one JSON line per unit: {"unit", "tops"} (multiply-adds x 2).
Each thread runs ITER iterations of 16 independent vector operations on registers; the sums are written
out so nothing is optimised away. Timed by timestamp queries around one pass, the best of 5.
"""

import json

import numpy as np
import wgpu

ITER = 4096
GROUPS = 132 * 64
HEAD = "@group(0) @binding(0) var<storage, read_write> out: array<u32>;\n"

BODIES = {
    # 16 vec4 fma: 64 multiply-adds per iteration
    "f32": (
        "",
        "vec4<f32>",
        "vec4<f32>(f32(lid) * 1e-3)",
        "a{i} = fma(a{i}, m, c);",
        "m = vec4<f32>(0.999); let c = vec4<f32>(1e-3);",
        64,
        "bitcast<u32>(dot(s, vec4<f32>(1.0)))",
    ),
    "f16": (
        "enable f16;\n",
        "vec4<f16>",
        "vec4<f16>(f16(lid % 7u) * 0.01h)",
        "a{i} = fma(a{i}, m, c);",
        "m = vec4<f16>(0.999h); let c = vec4<f16>(0.001h);",
        64,
        "u32(f32(dot(s, vec4<f16>(1.0h))) * 1000.0)",
    ),
    # 16 dot4I8Packed accumulations: 64 int8 multiply-adds per iteration
    "int8": ("", "i32", "i32(lid)", "a{i} += dot4I8Packed(w{i}, m);", "m = 0x01020304u + lid;", 64, "u32(s)"),
}


def source(unit: str) -> str:
    enable, ty, init, op, setup, _, out = BODIES[unit]
    lines = [
        enable + HEAD,
        "@compute @workgroup_size(256)",
        "fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {",
    ]
    lines.append("    var " + setup.replace("; let", ";\n    let"))
    for i in range(16):
        lines.append(f"    var a{i} = {init} + {ty}({i});")
        if unit == "int8":
            lines.append(f"    let w{i} = 0x7f00ff01u * {i + 1}u + lid;")
    lines.append(f"    for (var it = 0u; it < {ITER}u; it++) {{")
    lines += ["        " + op.format(i=i) for i in range(16)]
    if unit == "int8":
        lines.append("        m = m * 3u + 1u;")
    lines.append("    }")
    lines.append("    var s = " + " + ".join(f"a{i}" for i in range(16)) + ";")
    lines.append(f"    out[wid.x * 256u + lid] = {out};")
    lines.append("}")
    return "\n".join(lines)


def main():
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    features = [f for f in ("shader-f16", "timestamp-query") if f in adapter.features]
    device = adapter.request_device_sync(required_features=features)
    out = device.create_buffer(size=4 * 256 * GROUPS, usage=wgpu.BufferUsage.STORAGE)
    queries = device.create_query_set(type="timestamp", count=2)
    resolved = device.create_buffer(size=16, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
    print(json.dumps({"adapter": adapter.info.get("device"), "features": sorted(adapter.features)}))
    for unit in BODIES:
        if unit == "f16" and "shader-f16" not in features:
            print(json.dumps({"unit": unit, "error": "no shader-f16"}))
            continue
        try:
            module = device.create_shader_module(code=source(unit))
            pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
            group = device.create_bind_group(
                layout=pipeline.get_bind_group_layout(0), entries=[{"binding": 0, "resource": {"buffer": out}}]
            )
            best = 1e9
            for _ in range(6):
                encoder = device.create_command_encoder()
                compute = encoder.begin_compute_pass(
                    timestamp_writes={
                        "query_set": queries,
                        "beginning_of_pass_write_index": 0,
                        "end_of_pass_write_index": 1,
                    }
                )
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, group)
                compute.dispatch_workgroups(GROUPS)
                compute.end()
                encoder.resolve_query_set(queries, 0, 2, resolved, 0)
                device.queue.submit([encoder.finish()])
                ticks = np.frombuffer(device.queue.read_buffer(resolved, 0, 16), np.uint64)
                best = min(best, float(ticks[1] - ticks[0]) * 1e-9)
            macs = 256 * GROUPS * ITER * BODIES[unit][5]
            print(json.dumps({"unit": unit, "seconds": best, "tops": round(2 * macs / best / 1e12, 2)}))
        except Exception as exc:  # a probe: say what failed and go on
            print(json.dumps({"unit": unit, "error": f"{type(exc).__name__}: {exc}"[:500]}))


if __name__ == "__main__":
    main()
