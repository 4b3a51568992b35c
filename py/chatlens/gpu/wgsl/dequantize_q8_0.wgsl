// Q8_0 blocks (quants._q8_0): 34 bytes = f16 scale d, then 32 int8 q; value = d * q.
// Uploaded regrouped (kernels.LAYOUTS): every 8 blocks as their 8 scales (one vec4), then each
// block's 32 quants (two vec4 each): 17 vec4 a group, every load 16 bytes.
// A unit (w_unit, the matmul's and the embedding's) is 8 consecutive elements of a block (4
// units a block); a wide unit (w_wide, the matvec's: WIDE = 16) is 16, one vec4 of quants.
alias WT = vec4<u32>;

fn i8x4(w: u32) -> vec4<f32> {
    let s = bitcast<i32>(w);
    return vec4<f32>(f32(extractBits(s, 0u, 8u)), f32(extractBits(s, 8u, 8u)),
                     f32(extractBits(s, 16u, 8u)), f32(extractBits(s, 24u, 8u)));
}

fn q8_0_scale(group: u32, slot: u32) -> f32 {
    return unpack2x16float(W[group][slot >> 1u])[slot & 1u];
}

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let b = g >> 2u;
    let group = seg + (b >> 3u) * 17u;
    let slot = b & 7u;
    let d = q8_0_scale(group, slot);
    let q = W[group + 1u + 2u * slot + ((g >> 1u) & 1u)];
    let half = select(q.xy, q.zw, (g & 1u) == 1u);
    return mat2x4<f32>(d * i8x4(half.x), d * i8x4(half.y));
}

// Half g of a block (g / 2 the block, of the tensor at vec4 `seg`): its 16 elements, 4 a vec4.
fn w_wide(seg: u32, g: u32) -> array<vec4<f32>, WIDE / 4u> {
    let b = g >> 1u;
    let group = seg + (b >> 3u) * 17u;
    let slot = b & 7u;
    let d = q8_0_scale(group, slot);
    let q = W[group + 1u + 2u * slot + (g & 1u)];
    return array<vec4<f32>, WIDE / 4u>(d * i8x4(q.x), d * i8x4(q.y), d * i8x4(q.z), d * i8x4(q.w));
}
