// Reads of the f32 cache (kv_store_f32.wgsl): 8 dims of a key from two vec4, 2 of a value.
fn key8(at: u32) -> mat2x4<f32> {
    return mat2x4<f32>(KC[2u * at], KC[2u * at + 1u]);
}

fn value2(word: u32) -> vec2<f32> {
    return VC[word];
}
