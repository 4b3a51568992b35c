// Reads of the f16 cache (kv_store_f16.wgsl): 8 dims of a key from one vec4<u32>, 2 of a value
// from one u32.
fn key8(at: u32) -> mat2x4<f32> {
    let w = KC[at];
    return mat2x4<f32>(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
                       vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
}

fn value2(word: u32) -> vec2<f32> {
    return unpack2x16float(VC[word]);
}
