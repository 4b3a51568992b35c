// Workgroup sums of NRED values per invocation, by a shared-memory tree (no subgroups).
struct Lanes {
    @builtin(local_invocation_id) unused: vec3<u32>,  // the subgroup variant's builtins have no use here
}

var<workgroup> red_part: array<f32, NRED * WG>;
var<workgroup> red_out: array<f32, NRED>;

// Afterwards every invocation reads the sums in red_out.
fn workgroup_sum(lid: u32, lanes: Lanes, v: ptr<function, array<f32, NRED>>) {
    for (var i = 0u; i < NRED; i++) {
        red_part[i * WG + lid] = (*v)[i];
    }
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            for (var i = 0u; i < NRED; i++) {
                red_part[i * WG + lid] += red_part[i * WG + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lid < NRED) {
        red_out[lid] = red_part[lid * WG];
    }
    workgroupBarrier();
}
