// Epilogue: model.silu(h @ gate.T) * (h @ up.T), both from one buffer (gate at SEG0, up at SEG1).
// Virtual rows pair them: 2f is gate row f, 2f + 1 is up row f; H is (T, NV / 2).
fn silu(x: f32) -> f32 {
    // exp(-x) overflows to inf for x < -88 and x / inf is the 0 NumPy gives; say so explicitly
    // since WGSL promises nothing about inf.
    return select(x / (1.0 + exp(-x)), 0.0, x < -80.0);
}

fn w_row(v: u32) -> vec2<u32> {
    return vec2<u32>(select(SEG0, SEG1, (v & 1u) == 1u), v / 2u);
}

fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    for (var j = 0u; j < ROWS / 2u; j++) {
        let f = v0 / 2u + j;
        if (2u * f < NV) {
            H[t * (NV / 2u) + f] = silu(y[2u * j]) * y[2u * j + 1u];
        }
    }
}
