// F32 weights (quants.dequantize's "F32"). A unit is 8 consecutive elements of a row: two vec4
// loads, so rows must hold a multiple of 8 elements.
alias WT = vec4<f32>;

// Unit g of the tensor that starts at element `seg` of W (g = row * UNITS + unit in row).
fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let i = seg + 2u * g;
    return mat2x4<f32>(W[i], W[i + 1u]);
}

// The matvec's wide unit is the unit (WIDE = 8): already 16-byte loads.
fn w_wide(seg: u32, g: u32) -> array<vec4<f32>, WIDE / 4u> {
    let w = w_unit(seg, g);
    return array<vec4<f32>, WIDE / 4u>(w[0], w[1]);
}
