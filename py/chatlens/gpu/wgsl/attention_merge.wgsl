// The second pass of split attention for a chunk of tokens: for token t and query head h,
// combine the splits' (m, l, o) into model.attention's output,
// softmax(scores) @ v = sum(exp(m_s - M) o_s) / sum(exp(m_s - M) l_s). (One token's merge is
// done by the o projection as it loads x: x_merge.wgsl, in the same order.)
// P is (T, NH, SPLITS, HD) of o, S (T, NH, SPLITS) of (m, l); A is (T, NH * HD), heads in order as
// model.attention returns them.
// A split whose every key is hidden (attention.wgsl's HIDDEN) holds m = -3.0e38, l = 0, o = 0:
// its weight exp(m - M) is 0 beside any split that reads a key (only prefill bodies hide keys).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t = wid.y;
    if (t >= step.n_tokens) {
        return;
    }
    let n_keys = step.start + t + 1u;
    let n_splits = (n_keys + step.split - 1u) / step.split;
    let base = (t * NH + h) * SPLITS;
    var big = -3.0e38;
    for (var s = 0u; s < n_splits; s++) {
        big = max(big, S[base + s].x);
    }
    var total = 0.0;
    for (var s = 0u; s < n_splits; s++) {
        let ml = S[base + s];
        total += exp(ml.x - big) * ml.y;
    }
    for (var d = lid; d < HD; d += WG) {
        var o = 0.0;
        for (var s = 0u; s < n_splits; s++) {
            o += exp(S[base + s].x - big) * P[(base + s) * HD + d];
        }
        A[(t * NH + h) * HD + d] = o / total;
    }
}
