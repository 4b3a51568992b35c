// An RMSNorm weight (its gain, G) stored as F16, two per u32.
alias GT = vec2<u32>;

fn gain4(i: u32) -> vec4<f32> {
    let p = G[i / 4u];
    return vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y));
}
