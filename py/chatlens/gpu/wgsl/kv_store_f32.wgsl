// The KV cache in f32 (NumPy's), a pair of dims (2i, 2i + 1) a vec2.
fn store_k(word: u32, v: vec2<f32>) {
    KC[word] = v;
}

fn store_v(word: u32, v: vec2<f32>) {
    VC[word] = v;
}
