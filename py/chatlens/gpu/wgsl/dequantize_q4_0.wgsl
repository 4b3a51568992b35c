// Q4_0 blocks (quants._q4_0): 18 bytes = f16 scale d, then 16 bytes whose low nibbles are
// elements 0..15 and high nibbles 16..31; value = d * (q - 8).
// A unit is one u32 of nibbles: elements 4w..4w+3 and 16+4w..16+4w+3 of its block.
alias WT = u32;

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let block = seg * 4u + (g >> 2u) * 18u;
    let d = w_f16_at(block);
    let q = w_u32_at(block + 2u + (g & 3u) * 4u);
    let lo = vec4<f32>(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u));
    let hi = vec4<f32>(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u), f32(q >> 28u));
    return mat2x4<f32>(d * (lo - 8.0), d * (hi - 8.0));
}

fn unit_x(u: u32) -> vec2<u32> {
    let base = (u >> 2u) * 32u + (u & 3u) * 4u;
    return vec2<u32>(base, base + 16u);
}
