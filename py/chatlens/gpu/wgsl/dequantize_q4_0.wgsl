// Q4_0 blocks (quants._q4_0): 18 bytes = f16 scale d, then 16 bytes whose low nibbles are
// elements 0..15 and high nibbles 16..31; value = d * (q - 8).
// Uploaded regrouped (kernels.LAYOUTS): every 8 blocks as their 8 scales (one vec4), then each
// block's 16 bytes of nibbles (one vec4 each): 9 vec4 a group, every load 16 bytes.
// A unit (w_unit, the matmul's and the embedding's) is 8 consecutive elements of a block:
// the low (units 0, 1) or high (2, 3) nibbles of two of its u32. A wide unit (w_wide, the
// matvec's: WIDE = 32) is a block.
alias WT = vec4<u32>;

fn q4_lo(q: u32) -> vec4<f32> {
    return vec4<f32>(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u)) - 8.0;
}

fn q4_hi(q: u32) -> vec4<f32> {
    return vec4<f32>(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u), f32(q >> 28u)) - 8.0;
}

fn q4_0_scale(group: u32, slot: u32) -> f32 {
    return unpack2x16float(W[group][slot >> 1u])[slot & 1u];
}

fn w_unit(seg: u32, g: u32) -> mat2x4<f32> {
    let b = g >> 2u;
    let group = seg + (b >> 3u) * 9u;
    let slot = b & 7u;
    let d = q4_0_scale(group, slot);
    let q = W[group + 1u + slot];
    let pair = select(q.xy, q.zw, (g & 1u) == 1u);
    if ((g & 2u) == 0u) {
        return mat2x4<f32>(d * q4_lo(pair.x), d * q4_lo(pair.y));
    }
    return mat2x4<f32>(d * q4_hi(pair.x), d * q4_hi(pair.y));
}

// Block g (of the tensor at vec4 `seg`): its 32 elements in order, 4 a vec4.
fn w_wide(seg: u32, g: u32) -> array<vec4<f32>, WIDE / 4u> {
    let group = seg + (g >> 3u) * 9u;
    let slot = g & 7u;
    let d = q4_0_scale(group, slot);
    let q = W[group + 1u + slot];
    return array<vec4<f32>, WIDE / 4u>(d * q4_lo(q.x), d * q4_lo(q.y), d * q4_lo(q.z), d * q4_lo(q.w),
                                       d * q4_hi(q.x), d * q4_hi(q.y), d * q4_hi(q.z), d * q4_hi(q.w));
}
