// x @ W.T for one token (decode): ROWS virtual rows per workgroup. A row is read in wide units
// (w_wide: WIDE consecutive elements, WIDE_UNITS a row, one 16-byte load of quantized blocks)
// split over the WG invocations. Every invocation loads each of its x units once and uses it
// for all ROWS rows; the ROWS dot products (and sum(x*x) when an RMSNorm is folded in) are then
// summed over the workgroup. The epilogue (finish) says what the rows mean and where they go.
// x is read through x4 (x_direct.wgsl: X (T, K) as it is; x_merge.wgsl: split attention merged as
// it is loaded); the token read is row 0, or for the output head (LAST_ROW) the chunk's last.
const XV: u32 = WIDE / 4u;  // vec4 of x a wide unit

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, lanes: Lanes) {
    let v0 = (wid.x + wid.y * GRID_X) * ROWS;  // a grid of more than 65535 workgroups wraps into y
    var x_row = 0u;
    if (LAST_ROW) {
        x_row = step.n_tokens - 1u;
    }
    x_begin(lid, x_row);
    var rows: array<vec2<u32>, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        rows[r] = w_row(min(v0 + r, NV - 1u));  // past NV: a repeat, never stored
    }
    var acc: array<f32, NRED>;
    for (var u = lid; u < WIDE_UNITS; u += WG) {
        var x: array<vec4<f32>, XV>;
        for (var j = 0u; j < XV; j++) {
            let k = WIDE * u + 4u * j;
            x[j] = x4(x_row, k);
            if (NORM) {
                acc[NRED - 1u] += dot(x[j], x[j]);
                x[j] *= gain4(k);
            }
        }
        for (var r = 0u; r < ROWS; r++) {
            let w = w_wide(rows[r].x, rows[r].y * WIDE_UNITS + u);
            for (var j = 0u; j < XV; j++) {
                acc[r] += dot(w[j], x[j]);
            }
        }
    }
    workgroup_sum(lid, lanes, &acc);
    if (lid == 0u) {
        var scale = 1.0;
        if (NORM) {
            scale = rms_scale(red_out[NRED - 1u]);
        }
        var y: array<f32, ROWS>;
        for (var r = 0u; r < ROWS; r++) {
            y[r] = red_out[r] * scale;
        }
        finish(0u, v0, y);
    }
}
