// attention.wgsl's workgroup max and sum of GROUP values an invocation: subgroupMax/subgroupAdd,
// then the subgroups' partials through shared memory (one barrier). Subgroups are taken to be
// consecutive runs of local_invocation_index, as in reduce_subgroup.wgsl. Every invocation
// gets the results; a partial is rewritten only after attention.wgsl's end-of-block barrier.
struct Lanes {
    @builtin(subgroup_invocation_id) id: u32,
    @builtin(subgroup_size) size: u32,
}

const MAX_SUBGROUPS: u32 = (WG + 3u) / 4u;  // WebGPU's smallest subgroup has 4 invocations
var<workgroup> part_m: array<f32, GROUP * MAX_SUBGROUPS>;
var<workgroup> part_l: array<f32, GROUP * MAX_SUBGROUPS>;

fn group_max(lid: u32, lanes: Lanes, v: array<f32, GROUP>) -> array<f32, GROUP> {
    for (var g = 0u; g < GROUP; g++) {
        let s = subgroupMax(v[g]);
        if (lanes.id == 0u) {
            part_m[g * MAX_SUBGROUPS + lid / lanes.size] = s;
        }
    }
    workgroupBarrier();
    let n_sg = (WG + lanes.size - 1u) / lanes.size;
    var out: array<f32, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        out[g] = part_m[g * MAX_SUBGROUPS];
        for (var j = 1u; j < n_sg; j++) {
            out[g] = max(out[g], part_m[g * MAX_SUBGROUPS + j]);
        }
    }
    return out;
}

fn group_sum(lid: u32, lanes: Lanes, v: array<f32, GROUP>) -> array<f32, GROUP> {
    for (var g = 0u; g < GROUP; g++) {
        let s = subgroupAdd(v[g]);
        if (lanes.id == 0u) {
            part_l[g * MAX_SUBGROUPS + lid / lanes.size] = s;
        }
    }
    workgroupBarrier();
    let n_sg = (WG + lanes.size - 1u) / lanes.size;
    var out: array<f32, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        out[g] = part_l[g * MAX_SUBGROUPS];
        for (var j = 1u; j < n_sg; j++) {
            out[g] += part_l[g * MAX_SUBGROUPS + j];
        }
    }
    return out;
}
