// Workgroup sums of NRED values per invocation: subgroupAdd, then one partial per subgroup in
// shared memory. Subgroups are taken to be consecutive runs of local_invocation_index, as every
// GPU lays out a 1-D workgroup (llama.cpp's WebGPU kernels assume the same).
struct Lanes {
    @builtin(subgroup_invocation_id) id: u32,
    @builtin(subgroup_size) size: u32,
}

const MAX_SUBGROUPS: u32 = (WG + 3u) / 4u;  // WebGPU's smallest subgroup has 4 invocations
var<workgroup> red_part: array<f32, NRED * MAX_SUBGROUPS>;
var<workgroup> red_out: array<f32, NRED>;

// Afterwards every invocation reads the sums in red_out.
fn workgroup_sum(lid: u32, lanes: Lanes, v: ptr<function, array<f32, NRED>>) {
    let sg = lid / lanes.size;
    for (var i = 0u; i < NRED; i++) {
        let s = subgroupAdd((*v)[i]);
        if (lanes.id == 0u) {
            red_part[i * MAX_SUBGROUPS + sg] = s;
        }
    }
    workgroupBarrier();
    if (lid < NRED) {
        let n_sg = (WG + lanes.size - 1u) / lanes.size;
        var t = 0.0;
        for (var j = 0u; j < n_sg; j++) {
            t += red_part[lid * MAX_SUBGROUPS + j];
        }
        red_out[lid] = t;
    }
    workgroupBarrier();
}
