// Q8_0 blocks (quants._q8_0): 34 bytes = f16 scale d, then 32 int8 q; value = d * q.
// A unit is 8 consecutive elements of a block (4 units a block).
alias WT = u32;

fn i8x4(w: u32) -> vec4<f32> {
    let s = bitcast<i32>(w);
    return vec4<f32>(f32(extractBits(s, 0u, 8u)), f32(extractBits(s, 8u, 8u)),
                     f32(extractBits(s, 16u, 8u)), f32(extractBits(s, 24u, 8u)));
}

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let block = seg * 4u + (g >> 2u) * 34u;
    let d = w_f16_at(block);
    let q = block + 2u + (g & 3u) * 8u;
    return mat2x4<f32>(d * i8x4(w_u32_at(q)), d * i8x4(w_u32_at(q + 4u)));
}

fn unit_x(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 8u * u + 4u);
}
