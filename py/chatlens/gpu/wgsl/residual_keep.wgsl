// Epilogue: model._block's last residual add, x = x + y @ W.T in place on the stream R (T, NV),
// as residual.wgsl does it, and the new x copied into row LAYER[0] of KEEP (layers, NV): the
// block's output that an inspection's logit lens reads (model.Probe's blocks). Only the inspect
// sequences take it; decode and prefill keep residual.wgsl.
fn w_row(v: u32) -> vec2<u32> {
    return vec2<u32>(SEG0, v);
}

fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    for (var r = 0u; r < ROWS; r++) {
        if (v0 + r < NV) {
            let x = R[t * NV + v0 + r] + y[r];
            R[t * NV + v0 + r] = x;
            KEEP[LAYER[0] * NV + v0 + r] = x;
        }
    }
}
