// An RMSNorm weight (its gain, G) stored as BF16, two per u32: each the high half of an f32.
alias GT = vec2<u32>;

fn gain4(i: u32) -> vec4<f32> {
    let p = G[i / 4u];
    return vec4<f32>(bitcast<f32>(p.x << 16u), bitcast<f32>(p.x & 0xffff0000u),
                     bitcast<f32>(p.y << 16u), bitcast<f32>(p.y & 0xffff0000u));
}
