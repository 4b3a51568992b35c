// model.attention split over the keys (flash decoding): a workgroup takes one token t of the
// chunk, one KV head, and one split of step.split keys, for the GROUP query heads that share
// that KV head. It writes, per query head, the split's max score m, sum of exp(score - m), and
// the exp-weighted sum of values; attention_merge.wgsl combines the splits. Causal: token t
// (at position start + t) sees keys 0..start + t.
// Q is (T, NH * HD); KC, VC are (NKV, N_CTX, HD); P is (T, NH, SPLITS, HD + 2).
// Grid (SPLITS, NKV, chunk tokens); workgroups past this step's keys or tokens return at once.
const GH: u32 = GROUP * HD;

var<workgroup> qs: array<vec4<f32>, GH / 4u>;
var<workgroup> scores: array<f32, GROUP * SPLIT_MAX>;
var<workgroup> red: array<f32, GROUP * WG>;

// red[g * WG + 0] = max (is_max) or sum over the workgroup of red[g * WG + lid]
fn reduce(lid: u32, is_max: bool) {
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            for (var g = 0u; g < GROUP; g++) {
                let a = red[g * WG + lid];
                let b = red[g * WG + lid + s];
                red[g * WG + lid] = select(a + b, max(a, b), is_max);
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let split = wid.x;
    let kv = wid.y;
    let t = wid.z;
    let n_keys = step.start + t + 1u;
    let k0 = split * step.split;
    if (t >= step.n_tokens || k0 >= n_keys) {
        return;
    }
    let nk = min(step.split, n_keys - k0);
    for (var i = lid; i < GH / 4u; i += WG) {
        qs[i] = Q[(t * NH * HD + kv * GH) / 4u + i];
    }
    workgroupBarrier();

    // scores of this split's keys, and each invocation's max
    var m: array<f32, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        m[g] = -3.0e38;
    }
    for (var j = lid; j < nk; j += WG) {
        let key = ((kv * N_CTX + k0 + j) * HD) / 4u;
        var s: array<f32, GROUP>;
        for (var d = 0u; d < HD / 4u; d++) {
            let kd = KC[key + d];
            for (var g = 0u; g < GROUP; g++) {
                s[g] += dot(qs[g * HD / 4u + d], kd);
            }
        }
        for (var g = 0u; g < GROUP; g++) {
            let sc = s[g] * SCALE;
            scores[g * SPLIT_MAX + j] = sc;
            m[g] = max(m[g], sc);
        }
    }
    for (var g = 0u; g < GROUP; g++) {
        red[g * WG + lid] = m[g];
    }
    workgroupBarrier();
    reduce(lid, true);
    for (var g = 0u; g < GROUP; g++) {
        m[g] = red[g * WG];
    }
    workgroupBarrier();

    // exp(score - max) and its sum
    var l: array<f32, GROUP>;
    for (var j = lid; j < nk; j += WG) {
        for (var g = 0u; g < GROUP; g++) {
            let e = exp(scores[g * SPLIT_MAX + j] - m[g]);
            scores[g * SPLIT_MAX + j] = e;
            l[g] += e;
        }
    }
    for (var g = 0u; g < GROUP; g++) {
        red[g * WG + lid] = l[g];
    }
    workgroupBarrier();
    reduce(lid, false);

    // the exp-weighted sum of values, one (head, dim) per invocation
    for (var i = lid; i < GH; i += WG) {
        let g = i / HD;
        let d = i % HD;
        var o = 0.0;
        for (var j = 0u; j < nk; j++) {
            o += scores[g * SPLIT_MAX + j] * VC[(kv * N_CTX + k0 + j) * HD + d];
        }
        let head = kv * GROUP + g;
        let out = ((t * NH + head) * SPLITS + split) * (HD + 2u);
        P[out + d] = o;
        if (d == 0u) {
            P[out + HD] = m[g];
            P[out + HD + 1u] = red[g * WG];
        }
    }
}
