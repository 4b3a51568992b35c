// x @ W.T for one token (decode): ROWS virtual rows per workgroup. A row is read in wide units
// (w_wide: WIDE elements, WIDE_UNITS a row, one 16-byte load of quantized blocks, consecutive
// elements), split over LANES invocations; the workgroup's RS slots of LANES take ROWS / RS
// rows each (RS > 1 where a row has too few wide units to busy a workgroup). An invocation
// loads each of its x units once for all its rows; the ROWS dot products (and sum(x*x) when an
// RMSNorm is folded in) are then summed over the workgroup. The epilogue (finish) says what
// the rows mean and where they go.
// X is (T, K); the token read is row 0, or for the output head (LAST_ROW) the chunk's last.
const RPS: u32 = ROWS / RS;  // rows a slot takes
const XV: u32 = WIDE / 4u;  // vec4 of x a wide unit

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, lanes: Lanes) {
    let v0 = (wid.x + wid.y * GRID_X) * ROWS;  // a grid of more than 65535 workgroups wraps into y
    let lane = lid % LANES;
    let slot = lid / LANES;
    var x_row = 0u;
    if (LAST_ROW) {
        x_row = step.n_tokens - 1u;
    }
    var rows: array<vec2<u32>, RPS>;
    for (var r = 0u; r < RPS; r++) {
        rows[r] = w_row(min(v0 + slot * RPS + r, NV - 1u));  // past NV: a repeat, never stored
    }
    var dots: array<f32, RPS>;
    var ss = 0.0;
    for (var u = lane; u < WIDE_UNITS; u += LANES) {
        var x: array<vec4<f32>, XV>;
        for (var j = 0u; j < XV; j++) {
            let k = WIDE * u + 4u * j;
            x[j] = X[(x_row * K + k) / 4u];
            if (NORM) {
                ss += dot(x[j], x[j]);
                x[j] *= gain4(k);
            }
        }
        for (var r = 0u; r < RPS; r++) {
            let w = w_wide(rows[r].x, rows[r].y * WIDE_UNITS + u);
            for (var j = 0u; j < XV; j++) {
                dots[r] += dot(w[j], x[j]);
            }
        }
    }
    var acc: array<f32, NRED>;  // zero but for this slot's rows (and slot 0's sum of x*x)
    for (var r = 0u; r < RPS; r++) {
        acc[slot * RPS + r] = dots[r];
    }
    if (NORM && slot == 0u) {
        acc[NRED - 1u] = ss;
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
