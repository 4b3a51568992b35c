// model.attention's weights for one token, the ones an inspection keeps (model.Probe,
// model.NumpyBackend.inspect): for query head wid.x, softmax(q k^T * SCALE) over the keys
// 0..step.start (every cached position and the token's own), written to
// AW[AT + (LAYER[0] * NH + head) * n_keys + key]: layer-major, then head, then key, packed for
// this step's n_keys so the host reads one run of floats (chatlens.gpu.backend.read_inspect).
// Q is (1, NH * HD), rotated (rope.wgsl); KC is (NKV, N_CTX, HD), read through
// kv_load_<dtype>.wgsl. Query head h reads KV head h / GROUP, as model.attention groups them.
// One workgroup a query head: the scores go to AW first, then exp(score - max), then / sum, each
// invocation rereading only what it wrote itself.
var<workgroup> red: array<f32, WG>;

// The workgroup's max (op 0) or sum (op 1) of v, which every invocation gets.
fn reduce(lid: u32, v: f32, op: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            if (op == 0u) {
                red[lid] = max(red[lid], red[lid + s]);
            } else {
                red[lid] = red[lid] + red[lid + s];
            }
        }
        workgroupBarrier();
    }
    let out = red[0];
    workgroupBarrier();  // every invocation has read it before the next reduce writes
    return out;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.x;
    let kv = head / GROUP;
    let n_keys = step.start + 1u;
    let base = AT + (LAYER[0] * NH + head) * n_keys;
    let q0 = (head * HD) / 4u;
    var m = -3.0e38;
    for (var j = lid; j < n_keys; j += WG) {
        let key = ((kv * N_CTX + j) * HD) / 8u;
        var s = 0.0;
        for (var d = 0u; d < HD / 8u; d++) {
            let kd = key8(key + d);
            s += dot(Q[q0 + 2u * d], kd[0]) + dot(Q[q0 + 2u * d + 1u], kd[1]);
        }
        let sc = s * SCALE;
        AW[base + j] = sc;
        m = max(m, sc);
    }
    let big = reduce(lid, m, 0u);
    var total = 0.0;
    for (var j = lid; j < n_keys; j += WG) {
        let e = exp(AW[base + j] - big);
        AW[base + j] = e;
        total += e;
    }
    let sum = reduce(lid, total, 1u);
    for (var j = lid; j < n_keys; j += WG) {
        AW[base + j] = AW[base + j] / sum;
    }
}
