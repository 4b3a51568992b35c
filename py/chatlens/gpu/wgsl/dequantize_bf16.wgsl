// BF16 weights (quants.dequantize's "BF16"), two per u32: a bfloat16 is the high half of an f32.
alias WT = vec4<u32>;

fn bf16x2(w: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
}

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let p = W[seg + g];
    return mat2x4<f32>(vec4<f32>(bf16x2(p.x), bf16x2(p.y)), vec4<f32>(bf16x2(p.z), bf16x2(p.w)));
}

// The matvec's wide unit is the unit (WIDE = 8): already 16-byte loads.
fn w_wide(seg: u32, g: u32) -> array<vec4<f32>, WIDE / 4u> {
    let w = w_unit(seg, g);
    return array<vec4<f32>, WIDE / 4u>(w[0], w[1]);
}
