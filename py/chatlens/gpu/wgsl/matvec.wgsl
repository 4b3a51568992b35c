// x @ W.T for one token (decode): ROWS virtual rows per workgroup, WG invocations splitting
// each row's UNITS units (8 elements each). Every invocation loads its x units once and uses
// them for all ROWS rows; the ROWS dot products (and sum(x*x) when an RMSNorm is folded in)
// are then summed over the workgroup. The epilogue (finish) says what the rows mean and
// where they go.
// X is (T, K); the token read is row 0, or for the output head (LAST_ROW) the chunk's last.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32, lanes: Lanes) {
    let v0 = (wid.x + wid.y * GRID_X) * ROWS;  // a grid of more than 65535 workgroups wraps into y
    var x_row = 0u;
    if (LAST_ROW) {
        x_row = step.n_tokens - 1u;
    }
    var rows: array<vec2<u32>, ROWS>;
    for (var r = 0u; r < ROWS; r++) {
        rows[r] = w_row(min(v0 + r, NV - 1u));  // past NV: a repeat, never stored
    }
    var acc: array<f32, NRED>;
    for (var u = lid; u < UNITS; u += WG) {
        let at = unit_x(u);
        var xa = X[(x_row * K + at.x) / 4u];
        var xb = X[(x_row * K + at.y) / 4u];
        if (NORM) {
            acc[NRED - 1u] += dot(xa, xa) + dot(xb, xb);
            xa *= gain4(at.x);
            xb *= gain4(at.y);
        }
        for (var r = 0u; r < ROWS; r++) {
            let w = w_unit(rows[r].x, rows[r].y * UNITS + u);
            acc[r] += dot(w[0], xa) + dot(w[1], xb);
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
