// The matvec's x read as it is: row `row` of X (T, K), the vec4 at element k (NumPy's x[row, k:k+4]).
fn x_begin(lid: u32, row: u32) {
}

fn x4(row: u32, k: u32) -> vec4<f32> {
    return X[(row * K + k) / 4u];
}
