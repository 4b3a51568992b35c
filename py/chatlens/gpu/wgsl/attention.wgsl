// model.attention over the cache: a workgroup takes one token t of the chunk and one KV
// head, for the GROUP query heads that share it, and walks its keys in blocks of BLOCK with a
// running max and sum (online softmax). Causal: token t (at position start + t) sees keys
// 0..start + t.
// DIRECT: the workgroup takes every key and writes softmax(scores) @ v itself (one dispatch,
// attention_direct.wgsl). Else it takes split wid.x of step.split keys (flash decoding) and
// writes, per query head, the split's exp-weighted sum of values, its max score and sum of
// exp(score - max) (attention_split.wgsl); attention_merge.wgsl combines a chunk's splits, and
// x_merge.wgsl one token's as the o projection loads them.
// Q is (T, NH * HD); KC, VC are (NKV, N_CTX, HD), read through kv_load_<dtype>.wgsl.
// Its maxima and sums over the workgroup: attention_reduce_<shared|subgroup>.wgsl.
// Grid (SPLITS, NKV, chunk tokens); workgroups past this step's keys or tokens return at once.
// HIDDEN (the *_hidden sequences only; a const, so other pipelines never read the fields): the
// keys of step.n_hidden ranges [a, b) (pairs after the chunk's ids) are hidden from every token of
// the chunk, model.attention's `hidden` (chatlens.cause's knockout: a piece, or several together). A hidden key scores LOWEST, below the running max's
// start (-3.0e38): it never raises a max, and its exp(score - max) is exactly 0 even while the
// max is still that start (exp(-4e37)), so a split whose every key is hidden writes m = -3.0e38
// and l = 0, which the merges weigh by exp(-3.0e38 - M) = 0: no NaN where another split reads.
const GH: u32 = GROUP * HD;
const HP: u32 = HD / 2u;  // pairs of dims a key holds
const OUTS: u32 = (GROUP * HP + WG - 1u) / WG;  // (head, dim pair) outputs per invocation
const LOWEST: f32 = -0x1.fffffep+127f;  // a hidden key's score: the lowest finite f32

// Whether a key lies in a hidden range (step.hidden_start..hidden_end-1 encloses them all).
fn hidden_key(key: u32) -> bool {
    if (key < step.hidden_start || key >= step.hidden_end) {
        return false;
    }
    for (var r = 0u; r < step.n_hidden; r++) {
        let at = step.n_tokens + 2u * r;
        if (key >= step.tokens[at] && key < step.tokens[at + 1u]) {
            return true;
        }
    }
    return false;
}

var<workgroup> qs: array<vec4<f32>, GH / 4u>;
var<workgroup> scores: array<f32, GROUP * BLOCK>;
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, lanes: Lanes) {
    let kv = wid.y;
    let t = wid.z;
    let n_keys = step.start + t + 1u;
    var k0 = 0u;
    var k_end = n_keys;
    if (!DIRECT) {
        k0 = wid.x * step.split;
        k_end = min(k0 + step.split, n_keys);
    }
    if (t >= step.n_tokens || k0 >= n_keys) {
        return;
    }
    for (var i = lid; i < GH / 4u; i += WG) {
        qs[i] = Q[(t * NH * HD + kv * GH) / 4u + i];
    }
    workgroupBarrier();

    var m: array<f32, GROUP>;  // the running max of each head's scores, the same in every invocation
    var l: array<f32, GROUP>;  // its running sum of exp(score - m)
    var o: array<vec2<f32>, OUTS>;  // exp-weighted sums of values: (head, dim pair) lid + i * WG
    for (var g = 0u; g < GROUP; g++) {
        m[g] = -3.0e38;
    }
    for (var b0 = k0; b0 < k_end; b0 += BLOCK) {
        let nb = min(BLOCK, k_end - b0);
        // this block's scores, and each invocation's max
        var bm: array<f32, GROUP>;
        for (var g = 0u; g < GROUP; g++) {
            bm[g] = -3.0e38;
        }
        for (var j = lid; j < nb; j += WG) {
            let key = ((kv * N_CTX + b0 + j) * HD) / 8u;
            var s: array<f32, GROUP>;
            for (var g = 0u; g < GROUP; g++) {
                s[g] = 0.0;  // explicitly: a declaration in a loop is not re-zeroed by every compiler
            }
            for (var d = 0u; d < HD / 8u; d++) {
                let kd = key8(key + d);
                for (var g = 0u; g < GROUP; g++) {
                    s[g] += dot(qs[(g * HD) / 4u + 2u * d], kd[0]) + dot(qs[(g * HD) / 4u + 2u * d + 1u], kd[1]);
                }
            }
            let hidden = HIDDEN && hidden_key(b0 + j);
            for (var g = 0u; g < GROUP; g++) {
                let sc = select(s[g] * SCALE, LOWEST, hidden);
                scores[g * BLOCK + j] = sc;
                bm[g] = max(bm[g], sc);
            }
        }
        let block_max = group_max(lid, lanes, bm);
        // the new running max, what the old sums are scaled by, and exp(score - max)
        var alpha: array<f32, GROUP>;
        var bl: array<f32, GROUP>;
        for (var g = 0u; g < GROUP; g++) {
            bl[g] = 0.0;
            let mn = max(m[g], block_max[g]);
            alpha[g] = exp(m[g] - mn);
            m[g] = mn;
        }
        for (var j = lid; j < nb; j += WG) {  // the scores this invocation wrote: no barrier needed
            for (var g = 0u; g < GROUP; g++) {
                let e = exp(scores[g * BLOCK + j] - m[g]);
                scores[g * BLOCK + j] = e;
                bl[g] += e;
            }
        }
        let block_sum = group_sum(lid, lanes, bl);  // its barrier: every score is exp'd before the sums below
        for (var g = 0u; g < GROUP; g++) {
            l[g] = l[g] * alpha[g] + block_sum[g];
        }
        // the exp-weighted sum of values, two dims of one head per output
        for (var i = 0u; i < OUTS; i++) {
            let at = lid + i * WG;
            if (at < GROUP * HP) {
                let g = at / HP;
                let dp = at % HP;
                var acc = o[i] * alpha[g];
                for (var j = 0u; j < nb; j++) {
                    acc += scores[g * BLOCK + j] * value2((kv * N_CTX + b0 + j) * HP + dp);
                }
                o[i] = acc;
            }
        }
        workgroupBarrier();  // everyone is done with this block's scores and sums
    }

    for (var i = 0u; i < OUTS; i++) {
        let at = lid + i * WG;
        if (at < GROUP * HP) {
            let g = at / HP;
            emit(t, kv * GROUP + g, wid.x, 2u * (at % HP), o[i], m[g], l[g]);
        }
    }
}
