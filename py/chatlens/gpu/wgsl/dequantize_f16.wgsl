// F16 weights (quants.dequantize's "F16"), two per u32, unpacked in the shader: no shader-f16
// needed. A unit is 8 consecutive elements: one vec4<u32>.
alias WT = vec4<u32>;

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let p = W[seg + g];
    return mat2x4<f32>(vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y)),
                       vec4<f32>(unpack2x16float(p.z), unpack2x16float(p.w)));
}

// The matvec's wide unit is the unit (WIDE = 8): already 16-byte loads.
fn w_wide(seg: u32, g: u32) -> array<vec4<f32>, WIDE / 4u> {
    let w = w_unit(seg, g);
    return array<vec4<f32>, WIDE / 4u>(w[0], w[1]);
}
