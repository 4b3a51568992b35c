// Epilogue: y = x @ W.T stored as it is, Y (T, NV); the logits of the output projection.
fn w_row(v: u32) -> vec2<u32> {
    return vec2<u32>(SEG0, v);
}

fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    for (var r = 0u; r < ROWS; r++) {
        if (v0 + r < NV) {
            Y[t * NV + v0 + r] = y[r];
        }
    }
}
