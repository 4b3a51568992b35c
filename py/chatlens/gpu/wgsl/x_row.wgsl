// The matvec's x read from row LAYER[0] of X (layers, K), whatever the step's tokens: the logit
// lens reads one block's output at a time (model.Probe's blocks[LAYER[0]], x[row, k:k+4] in NumPy).
// LAYER is bound by the epilogue (store_row.wgsl).
fn x_begin(lid: u32, row: u32) {
}

fn x4(row: u32, k: u32) -> vec4<f32> {
    return X[(LAYER[0] * K + k) / 4u];
}
