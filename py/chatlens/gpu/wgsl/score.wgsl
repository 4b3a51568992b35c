// model.NumpyBackend.score's figures of each scored row, from the logits the score sequence's
// output projection wrote for every row of the chunk: row r (step.score_from <= r < T) is the
// step after token r, its target step.tokens[r + 1], the last row's step.next_id. One workgroup
// a row writes OUT[r] = (target logit, max, sum of exp(logit - max), argmax id), the floats as
// their bits: log_z = max + log(sum) (taken on the host, as for top_k), p(target) =
// exp(target logit - log_z), and the max is the argmax's logit. The argmax is np.argmax's: the
// lowest id among equal maxima (argmax.wgsl's rule).
// LOGITS is (chunk, V); OUT (chunk) of vec4<u32>. Grid (chunk, 1, 1): rows outside the scored
// ones return at once.
const NONE: u32 = 0xffffffffu;
const LOWEST: f32 = -0x1.fffffep+127f;  // the lowest finite f32

var<workgroup> red_v: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wid.x;
    if (r < step.score_from || r >= step.n_tokens) {
        return;
    }
    let row = r * V;
    // the row's max and the lowest id that holds it
    var v = LOWEST;
    var id = NONE;
    for (var i = lid; i < V; i += WG) {
        let x = LOGITS[row + i];
        if (x > v || id == NONE) {  // ids rise along the loop: a later equal value never wins
            v = x;
            id = i;
        }
    }
    red_v[lid] = v;
    red_i[lid] = id;
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            let ov = red_v[lid + s];
            let oi = red_i[lid + s];
            if (oi != NONE && (red_i[lid] == NONE || ov > red_v[lid] || (ov == red_v[lid] && oi < red_i[lid]))) {
                red_v[lid] = ov;
                red_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    let big = red_v[0];
    let top = red_i[0];
    workgroupBarrier();  // every invocation has read red_v[0] before the sums overwrite it
    // the sum of exp(logit - max) over the vocabulary
    var e = 0.0;
    for (var i = lid; i < V; i += WG) {
        e += exp(LOGITS[row + i] - big);
    }
    red_v[lid] = e;
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            red_v[lid] += red_v[lid + s];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        var want = step.next_id;
        if (r + 1u < step.n_tokens) {
            want = step.tokens[r + 1u];
        }
        OUT[r] = vec4<u32>(bitcast<u32>(LOGITS[row + want]), bitcast<u32>(big), bitcast<u32>(red_v[0]), top);
    }
}
