// The matvec's x merged from split attention's partials as it is loaded: model.attention's
// output for token `row` (softmax(scores) @ v, heads in order), the merge attention_merge.wgsl
// does in a pass of its own, here without a dispatch: for query head h,
//     x[h * HD + d] = sum_s exp(m_s - M) o_s[d] / sum_s exp(m_s - M) l_s,   M = max_s m_s
// over the splits that hold this step's keys, in the same order and the same float32 operations
// as attention_merge.wgsl. P is (T, NH, SPLITS, HD) of o, S (T, NH, SPLITS) of (m, l):
// attention_split.wgsl writes them. Every workgroup of the matvec merges all of x (it reads all
// of it anyway); each split's weight exp(m_s - M) is computed once a workgroup, in shared memory
// (NH * SPLITS floats: kernels.MERGE_MAX bounds them).
var<private> n_splits: u32;
var<workgroup> split_weight: array<f32, NH * SPLITS>;  // exp(m_s - M), head-major
var<workgroup> head_sum: array<f32, NH>;  // sum_s exp(m_s - M) l_s of each head

// The splits' weights and each head's sum, once a workgroup; every invocation reads them after
// the barrier.
fn x_begin(lid: u32, row: u32) {
    let n_keys = step.start + row + 1u;
    n_splits = (n_keys + step.split - 1u) / step.split;
    for (var h = lid; h < NH; h += WG) {
        let base = (row * NH + h) * SPLITS;
        var big = -3.0e38;
        for (var s = 0u; s < n_splits; s++) {
            big = max(big, S[base + s].x);
        }
        var total = 0.0;
        for (var s = 0u; s < n_splits; s++) {
            let ml = S[base + s];
            let e = exp(ml.x - big);
            split_weight[h * SPLITS + s] = e;
            total += e * ml.y;
        }
        head_sum[h] = total;
    }
    workgroupBarrier();
}

fn x4(row: u32, k: u32) -> vec4<f32> {
    let h = k / HD;
    let base = (row * NH + h) * SPLITS;
    var o = vec4<f32>(0.0);
    for (var s = 0u; s < n_splits; s++) {
        o += split_weight[h * SPLITS + s] * P[((base + s) * HD + k % HD) / 4u];
    }
    return o / head_sum[h];
}
