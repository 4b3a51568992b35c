// x @ W.T for a chunk of tokens (prefill): a workgroup computes a TM x TN tile (tokens x virtual
// rows), walking K in steps of KT = 32 (one quantized block) through shared memory. Each
// invocation loads one vec4 of x and one 8-element unit of W per step, then accumulates RM
// tokens x ROWS rows. An RMSNorm folded in multiplies x by its gain as x is loaded, and sums
// x*x per token on the way. The epilogue (finish) says what the rows mean and where they go.
// X is (T, K); the grid covers the largest chunk, and tiles past this chunk's T return at once.
const TX: u32 = TN / ROWS;  // invocations across the tile's rows
const X_PER_ROW: u32 = KT / 4u;  // vec4 of x per token per step
const U_PER_ROW: u32 = KT / 8u;  // W units per row per step

var<workgroup> xs: array<f32, KT * TM>;  // [k][token]
var<workgroup> ws: array<vec4<f32>, KT * TN / 4u>;  // [k][row / 4], four rows a vec4
var<workgroup> ss_part: array<f32, WG>;
var<workgroup> inv_rms: array<f32, TM>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v0 = wid.x * TN;
    let t0 = wid.y * TM;
    let n_tokens = step.n_tokens;
    if (t0 >= n_tokens) {
        return;
    }
    // what this invocation loads: token x_t's vec4 x_c of each step, and unit w_u of row w_r
    let x_t = lid / X_PER_ROW;
    let x_c = lid % X_PER_ROW;
    let w_r = lid / U_PER_ROW;
    let w_u = lid % U_PER_ROW;
    let row = w_row(min(v0 + w_r, NV - 1u));  // past NV: a repeat, never stored
    // what it computes: tokens ty*RM.. x rows tx*ROWS..
    let tx = lid % TX;
    let ty = lid / TX;
    var acc: array<vec4<f32>, RM>;
    var ss = 0.0;
    for (var k0 = 0u; k0 < K; k0 += KT) {
        let k = k0 + 4u * x_c;
        var xv = vec4<f32>(0.0);
        if (t0 + x_t < n_tokens && k < K) {
            xv = X[((t0 + x_t) * K + k) / 4u];
            if (NORM) {
                ss += dot(xv, xv);
                xv *= gain4(k);
            }
        }
        for (var e = 0u; e < 4u; e++) {
            xs[(4u * x_c + e) * TM + x_t] = xv[e];
        }
        let u = k0 / 8u + w_u;
        var w = mat2x4<f32>(vec4<f32>(0.0), vec4<f32>(0.0));
        if (u < UNITS) {
            w = w_unit(row.x, row.y * UNITS + u);
        }
        let at = unit_x(u) - vec2<u32>(k0);
        for (var e = 0u; e < 4u; e++) {
            ws[(at.x + e) * (TN / 4u) + w_r / 4u][w_r % 4u] = w[0][e];
            ws[(at.y + e) * (TN / 4u) + w_r / 4u][w_r % 4u] = w[1][e];
        }
        workgroupBarrier();
        for (var kk = 0u; kk < KT; kk++) {
            let b = ws[kk * (TN / 4u) + tx];
            for (var i = 0u; i < RM; i++) {
                acc[i] += xs[kk * TM + ty * RM + i] * b;
            }
        }
        workgroupBarrier();
    }
    if (NORM) {
        ss_part[lid] = ss;
        workgroupBarrier();
        if (lid < TM) {
            var s = 0.0;
            for (var c = 0u; c < X_PER_ROW; c++) {
                s += ss_part[lid * X_PER_ROW + c];
            }
            inv_rms[lid] = rms_scale(s);
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < RM; i++) {
        let t = t0 + ty * RM + i;
        if (t < n_tokens) {
            var y = acc[i];
            if (NORM) {
                y *= inv_rms[ty * RM + i];
            }
            finish(t, v0 + tx * ROWS, array<f32, ROWS>(y.x, y.y, y.z, y.w));
        }
    }
}
