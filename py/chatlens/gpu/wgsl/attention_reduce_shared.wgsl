// attention.wgsl's workgroup max and sum of GROUP values an invocation, by a shared-memory tree
// (no subgroups). Every invocation gets the results.
struct Lanes {
    @builtin(local_invocation_id) unused: vec3<u32>,  // the subgroup variant's builtins have no use here
}

var<workgroup> red_m: array<f32, GROUP * WG>;
var<workgroup> red_l: array<f32, GROUP * WG>;

fn group_max(lid: u32, lanes: Lanes, v: array<f32, GROUP>) -> array<f32, GROUP> {
    for (var g = 0u; g < GROUP; g++) {
        red_m[g * WG + lid] = v[g];
    }
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            for (var g = 0u; g < GROUP; g++) {
                red_m[g * WG + lid] = max(red_m[g * WG + lid], red_m[g * WG + lid + s]);
            }
        }
        workgroupBarrier();
    }
    var out: array<f32, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        out[g] = red_m[g * WG];
    }
    return out;
}

fn group_sum(lid: u32, lanes: Lanes, v: array<f32, GROUP>) -> array<f32, GROUP> {
    for (var g = 0u; g < GROUP; g++) {
        red_l[g * WG + lid] = v[g];
    }
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            for (var g = 0u; g < GROUP; g++) {
                red_l[g * WG + lid] += red_l[g * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    var out: array<f32, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        out[g] = red_l[g * WG];
    }
    return out;
}
