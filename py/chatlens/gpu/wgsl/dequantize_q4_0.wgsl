// Q4_0 blocks (quants._q4_0): 18 bytes = f16 scale d, then 16 bytes whose low nibbles are
// elements 0..15 and high nibbles 16..31; value = d * (q - 8).
// Uploaded regrouped (kernels.LAYOUTS): every 8 blocks as their 8 scales (4 u32), then their
// 8 x 16 bytes of nibbles: 36 u32 a group, every load aligned.
// A unit is one u32 of nibbles: elements 4w..4w+3 and 16+4w..16+4w+3 of its block.
alias WT = u32;

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let b = g >> 2u;
    let group = seg + (b >> 3u) * 36u;
    let slot = b & 7u;
    let d = unpack2x16float(W[group + (slot >> 1u)])[slot & 1u];
    let q = W[group + 4u + slot * 4u + (g & 3u)];
    let lo = vec4<f32>(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u));
    let hi = vec4<f32>(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u), f32(q >> 28u));
    return mat2x4<f32>(d * (lo - 8.0), d * (hi - 8.0));
}

fn unit_x(u: u32) -> vec2<u32> {
    let base = (u >> 2u) * 32u + (u & 3u) * 4u;
    return vec2<u32>(base, base + 16u);
}
