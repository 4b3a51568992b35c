// An RMSNorm weight (its gain, G) stored as F32: elements i..i+3 (i a multiple of 4).
alias GT = vec4<f32>;

fn gain4(i: u32) -> vec4<f32> {
    return G[i / 4u];
}
