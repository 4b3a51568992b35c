// The second pass of split attention: for token t and query head h, combine the splits'
// (m, l, o) into softmax(scores) @ v = sum(exp(m_s - M) o_s) / sum(exp(m_s - M) l_s).
// P is (T, NH, SPLITS, HD + 2); A is (T, NH * HD), heads in order as model.attention returns.
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
        big = max(big, P[(base + s) * (HD + 2u) + HD]);
    }
    var total = 0.0;
    for (var s = 0u; s < n_splits; s++) {
        let at = (base + s) * (HD + 2u);
        total += exp(P[at + HD] - big) * P[at + HD + 1u];
    }
    for (var d = lid; d < HD; d += WG) {
        var o = 0.0;
        for (var s = 0u; s < n_splits; s++) {
            let at = (base + s) * (HD + 2u);
            o += exp(P[at + HD] - big) * P[at + d];
        }
        A[(t * NH + h) * HD + d] = o / total;
    }
}
