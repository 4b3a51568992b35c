// Epilogue: the residual add of model._block, x = x + y @ W.T, in place on the stream R (T, NV).
fn w_row(v: u32) -> vec2<u32> {
    return vec2<u32>(SEG0, v);
}

fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    for (var r = 0u; r < ROWS; r++) {
        if (v0 + r < NV) {
            R[t * NV + v0 + r] += y[r];
        }
    }
}
