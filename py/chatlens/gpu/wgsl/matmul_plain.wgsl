// x @ W.T for a chunk of tokens (prefill), as matmul.wgsl computes it (model.py's x @ W.T, the
// same tiles and the same order of sums along K) but single-buffered: one pair of shared tiles
// KT deep (kernels.GEMMS: 32 for matmul_plain, 8 for the emulated adapters' matmul_small), two
// barriers a step (before the registers are stored into the tiles, after). The next step's x and
// W are still loaded into registers while this step's tiles are multiplied. A real GPU decides
// between matmul.wgsl and this file's 32-deep tiles (scripts/device_bench.py --gemm).
// Each invocation computes a 4 x 4 block of the TM x TN tile (4 tokens x ROWS = 4 rows) and
// loads one W unit a step (8 consecutive elements of a row, w_unit): WG == TN * KT / 8. An
// RMSNorm folded in multiplies x by its gain as x is stored and sums x*x per token on the way.
// X is (T, K); the grid covers the largest chunk, and tiles past this chunk's T return at once.
const TY: u32 = TM / 4u;  // invocations down the tile's tokens (4 each)
const TX: u32 = TN / ROWS;  // invocations across its rows (ROWS = 4 each)
const X_PER_ROW: u32 = KT / 4u;  // vec4 of x per token per step
const U_PER_ROW: u32 = KT / 8u;  // W units per row per step
const X_LOADS: u32 = TM * X_PER_ROW / WG;  // vec4 of x an invocation loads per step
const X_TOKENS: u32 = WG / X_PER_ROW;  // tokens one round of those loads covers

var<workgroup> xs: array<vec4<f32>, KT * TM / 4u>;  // [k][token / 4], four tokens a vec4
var<workgroup> ws: array<vec4<f32>, KT * TN / 4u>;  // [k][row / 4], four rows a vec4

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v0 = wid.x * TN;
    let t0 = wid.y * TM;
    let n_tokens = step.n_tokens;
    if (t0 >= n_tokens) {
        return;
    }
    // what this invocation loads: vec4 x_c of tokens x_t + i * X_TOKENS, and unit w_u of row w_r
    let x_t = lid / X_PER_ROW;
    let x_c = lid % X_PER_ROW;
    let w_r = lid / U_PER_ROW;
    let w_u = lid % U_PER_ROW;
    let row = w_row(min(v0 + w_r, NV - 1u));  // past NV: a repeat, never stored
    // what it computes: tokens 4 * ty.. x rows ROWS * tx..
    let tx = lid % TX;
    let ty = lid / TX;
    var acc: array<vec4<f32>, 4>;  // [token] of 4 rows
    var ss: array<f32, X_LOADS>;  // sum of x*x of each token it loads

    // step 0's tiles into registers
    var xv: array<vec4<f32>, X_LOADS>;
    for (var i = 0u; i < X_LOADS; i++) {
        xv[i] = load_x(t0 + x_t + i * X_TOKENS, 4u * x_c, n_tokens);
    }
    var w = load_w(row, w_u);
    for (var k0 = 0u; k0 < K; k0 += KT) {
        // registers -> shared tiles, after every invocation is done with the last step's
        workgroupBarrier();
        let k = k0 + 4u * x_c;
        for (var i = 0u; i < X_LOADS; i++) {
            var v = xv[i];
            if (NORM) {
                ss[i] += dot(v, v);
                v *= select(vec4<f32>(0.0), gain4(min(k, K - 4u)), k < K);
            }
            let t = x_t + i * X_TOKENS;
            for (var e = 0u; e < 4u; e++) {
                xs[(4u * x_c + e) * TY + t / 4u][t % 4u] = v[e];
            }
        }
        let at = 8u * w_u;  // the unit's first element in the step
        for (var e = 0u; e < 4u; e++) {
            ws[(at + e) * TX + w_r / 4u][w_r % 4u] = w[0][e];
            ws[(at + 4u + e) * TX + w_r / 4u][w_r % 4u] = w[1][e];
        }
        workgroupBarrier();
        // the next step's tiles into registers while this one's are multiplied
        let k1 = k0 + KT;
        if (k1 < K) {
            for (var i = 0u; i < X_LOADS; i++) {
                xv[i] = load_x(t0 + x_t + i * X_TOKENS, k1 + 4u * x_c, n_tokens);
            }
            w = load_w(row, k1 / 8u + w_u);
        }
        for (var kk = 0u; kk < KT; kk++) {
            let a = xs[kk * TY + ty];
            let c = ws[kk * TX + tx];
            acc[0] += a.x * c;
            acc[1] += a.y * c;
            acc[2] += a.z * c;
            acc[3] += a.w * c;
        }
    }
    var scale = vec4<f32>(1.0);
    if (NORM) {
        // each token's sum of x*x from the X_PER_ROW invocations that loaded it, through xs
        workgroupBarrier();
        for (var i = 0u; i < X_LOADS; i++) {
            let t = x_t + i * X_TOKENS;
            xs[t * X_PER_ROW + x_c][0] = ss[i];
        }
        workgroupBarrier();
        for (var i = 0u; i < 4u; i++) {
            var sum = 0.0;
            for (var c = 0u; c < X_PER_ROW; c++) {
                sum += xs[(4u * ty + i) * X_PER_ROW + c][0];
            }
            scale[i] = rms_scale(sum);
        }
    }
    for (var i = 0u; i < 4u; i++) {
        let t = t0 + 4u * ty + i;
        if (t < n_tokens) {
            let y = acc[i] * scale[i];
            finish(t, v0 + tx * ROWS, array<f32, ROWS>(y.x, y.y, y.z, y.w));
        }
    }
}

// vec4 of x at (token t, element k), zero past the chunk's tokens or K
fn load_x(t: u32, k: u32, n_tokens: u32) -> vec4<f32> {
    if (t < n_tokens && k < K) {
        return X[(t * K + k) / 4u];
    }
    return vec4<f32>(0.0);
}

// unit u of a row (8 consecutive elements), zero past the row's units
fn load_w(row: vec2<u32>, u: u32) -> mat2x4<f32> {
    if (u < UNITS) {
        return w_unit(row.x, row.y * UNITS + u);
    }
    return mat2x4<f32>(vec4<f32>(0.0), vec4<f32>(0.0));
}
