// np.argmax of the logits: the lowest id among equal maxima (the rule of chatlens.backend).
// One workgroup; OUT[0] is the chosen id, which the next decode's embed reads on the GPU.
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var v = -3.4e38;
    var id = 0xffffffffu;
    for (var i = lid; i < V; i += WG) {
        let x = LOGITS[i];
        if (x > v) {  // ids rise along the loop: a later equal value never wins
            v = x;
            id = i;
        }
    }
    best_v[lid] = v;
    best_i[lid] = id;
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            let ov = best_v[lid + s];
            let oi = best_i[lid + s];
            if (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid])) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        OUT[0] = best_i[0];
    }
}
