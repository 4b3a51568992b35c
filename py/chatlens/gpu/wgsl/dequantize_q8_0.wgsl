// Q8_0 blocks (quants._q8_0): 34 bytes = f16 scale d, then 32 int8 q; value = d * q.
// Uploaded regrouped (kernels.LAYOUTS): every 8 blocks as their 8 scales (16 bytes), then their
// 8 x 32 quants: 34 vec2<u32> a group, every load aligned. A unit is 8 consecutive elements of
// a block (4 units a block): one vec2<u32> of quants and its block's scale.
alias WT = vec2<u32>;

fn i8x4(w: u32) -> vec4<f32> {
    let s = bitcast<i32>(w);
    return vec4<f32>(f32(extractBits(s, 0u, 8u)), f32(extractBits(s, 8u, 8u)),
                     f32(extractBits(s, 16u, 8u)), f32(extractBits(s, 24u, 8u)));
}

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let b = g >> 2u;
    let group = seg + (b >> 3u) * 34u;
    let slot = b & 7u;
    let d = unpack2x16float(W[group + (slot >> 2u)][(slot >> 1u) & 1u])[slot & 1u];
    let q = W[group + 2u + slot * 4u + (g & 3u)];
    return mat2x4<f32>(d * i8x4(q.x), d * i8x4(q.y));
}

fn unit_x(u: u32) -> vec2<u32> {
    return vec2<u32>(8u * u, 8u * u + 4u);
}
