// Reads at any even byte offset of W (array<u32>): blocks of 34 or 18 bytes are not 4-byte aligned.
fn w_u32_at(byte: u32) -> u32 {
    let i = byte >> 2u;
    let shift = (byte & 3u) * 8u;
    if (shift == 0u) {
        return W[i];
    }
    return (W[i] >> shift) | (W[i + 1u] << (32u - shift));
}

fn w_f16_at(byte: u32) -> f32 {
    return unpack2x16float(W[byte >> 2u])[(byte >> 1u) & 1u];
}
