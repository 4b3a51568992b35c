// x @ W.T for a chunk of tokens (prefill), register-tiled and double-buffered: a workgroup
// computes a TM x TN tile (tokens x virtual rows), each invocation a 4 x 4 block of it (4 tokens
// x ROWS = 4 rows) from shared-memory tiles KT deep along K: per k, one vec4 of tokens and one
// vec4 of rows give 16 products. The tiles come in two buffers: while step s is multiplied from
// one, step s + 1 is loaded from global memory into registers and then stored into the other,
// so each step needs one barrier (after it, every invocation is done reading step s's buffer,
// which step s + 2 overwrites, and step s + 1's is whole). W is dequantized as it is loaded (a
// unit: 8 consecutive elements of a row, w_unit); an RMSNorm folded in multiplies x by its gain
// as x is stored and sums x*x per token on the way. The epilogue (finish) says what the rows
// mean and where they go.
// X is (T, K); the grid covers the largest chunk, and tiles past this chunk's T return at once.
const TY: u32 = TM / 4u;  // invocations down the tile's tokens (4 each)
const TX: u32 = TN / ROWS;  // invocations across its rows (ROWS = 4 each)
const X_PER_ROW: u32 = KT / 4u;  // vec4 of x per token per step
const U_PER_ROW: u32 = KT / 8u;  // W units per row per step
const X_LOADS: u32 = TM * X_PER_ROW / WG;  // vec4 of x an invocation loads per step
const X_TOKENS: u32 = WG / X_PER_ROW;  // tokens one round of those loads covers
const W_LOADERS: u32 = TN * U_PER_ROW;  // invocations that load a W unit per step (the first)
const STEPS: u32 = (K + KT - 1u) / KT;

var<workgroup> xs: array<array<vec4<f32>, KT * TM / 4u>, 2>;  // [buffer][k][token / 4], four tokens a vec4
var<workgroup> ws: array<array<vec4<f32>, KT * TN / 4u>, 2>;  // [buffer][k][row / 4], four rows a vec4

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let v0 = wid.x * TN;
    let t0 = wid.y * TM;
    let n_tokens = step.n_tokens;
    if (t0 >= n_tokens) {
        return;
    }
    // what this invocation loads: vec4 x_c of tokens x_t + i * X_TOKENS, and (the first
    // W_LOADERS) unit w_u of row w_r
    let x_t = lid / X_PER_ROW;
    let x_c = lid % X_PER_ROW;
    let loads_w = lid < W_LOADERS;
    let w_r = min(lid / U_PER_ROW, TN - 1u);
    let w_u = lid % U_PER_ROW;
    let row = w_row(min(v0 + w_r, NV - 1u));  // past NV: a repeat, never stored
    // what it computes: tokens 4 * ty.. x rows ROWS * tx..
    let tx = lid % TX;
    let ty = lid / TX;
    var acc: array<vec4<f32>, 4>;  // [token] of 4 rows
    var ss: array<f32, X_LOADS>;  // sum of x*x of each token it loads

    // step 0 into buffer 0
    var xv: array<vec4<f32>, X_LOADS>;
    var w = mat2x4<f32>(vec4<f32>(0.0), vec4<f32>(0.0));
    for (var i = 0u; i < X_LOADS; i++) {
        xv[i] = load_x(t0 + x_t + i * X_TOKENS, 4u * x_c, n_tokens);
    }
    if (loads_w) {
        w = load_w(row, w_u);
    }
    ss = put(0u, 0u, x_t, x_c, w_r, w_u, loads_w, xv, w, ss);
    workgroupBarrier();
    for (var s = 0u; s < STEPS; s++) {
        let more = s + 1u < STEPS;
        let k1 = (s + 1u) * KT;
        // the next step's tiles into registers while this one's are multiplied
        if (more) {
            for (var i = 0u; i < X_LOADS; i++) {
                xv[i] = load_x(t0 + x_t + i * X_TOKENS, k1 + 4u * x_c, n_tokens);
            }
            if (loads_w) {
                w = load_w(row, k1 / 8u + w_u);
            }
        }
        let b = s & 1u;
        for (var kk = 0u; kk < KT; kk++) {
            let a = xs[b][kk * TY + ty];
            let c = ws[b][kk * TX + tx];
            acc[0] += a.x * c;
            acc[1] += a.y * c;
            acc[2] += a.z * c;
            acc[3] += a.w * c;
        }
        if (more) {
            ss = put(b ^ 1u, k1, x_t, x_c, w_r, w_u, loads_w, xv, w, ss);
        }
        workgroupBarrier();
    }
    var scale = vec4<f32>(1.0);
    if (NORM) {
        // each token's sum of x*x from the X_PER_ROW invocations that loaded it, through xs
        // (every invocation is past the last step's barrier: buffer 0 is free)
        for (var i = 0u; i < X_LOADS; i++) {
            let t = x_t + i * X_TOKENS;
            xs[0][t * X_PER_ROW + x_c][0] = ss[i];
        }
        workgroupBarrier();
        for (var i = 0u; i < 4u; i++) {
            var sum = 0.0;
            for (var c = 0u; c < X_PER_ROW; c++) {
                sum += xs[0][(4u * ty + i) * X_PER_ROW + c][0];
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

// A step's registers (x at k0, gain folded in; W's unit) into shared buffer b; returns the sums
// of x*x with this step's added.
fn put(b: u32, k0: u32, x_t: u32, x_c: u32, w_r: u32, w_u: u32, loads_w: bool, xv: array<vec4<f32>, X_LOADS>,
       w: mat2x4<f32>, ss_in: array<f32, X_LOADS>) -> array<f32, X_LOADS> {
    var ss = ss_in;
    let k = k0 + 4u * x_c;
    for (var i = 0u; i < X_LOADS; i++) {
        var v = xv[i];
        if (NORM) {
            ss[i] += dot(v, v);
            v *= select(vec4<f32>(0.0), gain4(min(k, K - 4u)), k < K);
        }
        let t = x_t + i * X_TOKENS;
        for (var e = 0u; e < 4u; e++) {
            xs[b][(4u * x_c + e) * TY + t / 4u][t % 4u] = v[e];
        }
    }
    if (loads_w) {
        let at = 8u * w_u;  // the unit's first element in the step
        for (var e = 0u; e < 4u; e++) {
            ws[b][(at + e) * TX + w_r / 4u][w_r % 4u] = w[0][e];
            ws[b][(at + 4u + e) * TX + w_r / 4u][w_r % 4u] = w[1][e];
        }
    }
    return ss;
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
