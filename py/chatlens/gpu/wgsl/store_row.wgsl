// Epilogue: y = x @ W.T stored as row LAYER[0] of Y (layers, NV): one block's logit-lens logits,
// model.NumpyBackend._logits of that block's output (chatlens.inspection's lens), as store.wgsl
// stores the head's.
fn w_row(v: u32) -> vec2<u32> {
    return vec2<u32>(SEG0, v);
}

fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    let row = LAYER[0];
    for (var r = 0u; r < ROWS; r++) {
        if (v0 + r < NV) {
            Y[row * NV + v0 + r] = y[r];
        }
    }
}
