// The embedding lookup of model.NumpyBackend._forward, x = embed[ids], dequantized as it is
// gathered. A decode step takes its id from OUT[0], where the last argmax wrote it, when
// step.use_argmax says so: the chosen token never has to round-trip through the host.
// X is (T, K); grid (ceil(UNITS / WG), chunk tokens).
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.y;
    let u = wid.x * WG + lid;
    if (t >= step.n_tokens || u >= UNITS) {
        return;
    }
    var id = step.tokens[t];
    if (step.use_argmax == 1u) {
        id = OUT[0];
    }
    let w = w_unit(SEG0, id * UNITS + u);  // elements 8u..8u+7 of the row
    X[(t * K + 8u * u) / 4u] = w[0];
    X[(t * K + 8u * u) / 4u + 1u] = w[1];
}
