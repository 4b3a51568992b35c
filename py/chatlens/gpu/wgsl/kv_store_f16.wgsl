// The KV cache in f16, two per u32 (pack2x16float: no shader-f16 needed), dims (2i, 2i + 1) in
// word i of a key or value; the value NumPy's float16 cache holds (round to nearest even).
fn store_k(word: u32, v: vec2<f32>) {
    KC[word] = pack2x16float(v);
}

fn store_v(word: u32, v: vec2<f32>) {
    VC[word] = pack2x16float(v);
}
