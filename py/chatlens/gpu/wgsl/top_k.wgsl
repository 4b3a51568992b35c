// chatlens.backend.top_k_of on the GPU: the step.top_k best (id, logit) pairs, best first, equal
// logits by lower id. Two entry points: `chunks` finds each CHUNK of logits' own best step.top_k
// (grid: one workgroup per chunk), `merge` picks the best step.top_k of all those (one workgroup).
// CAND is (chunks, K_MAX) and OUT is (K_MAX) of (id, bitcast logit); a missing entry has id
// 0xffffffff and the lowest float, so it sorts last.
// Rows: LOGITS may hold several rows of V logits (the logit lens: one a layer), each found on
// its own: row wid.y of `chunks`' grid and wid.x of `merge`'s, its CAND at row * CAND_ROW and its
// OUT at row * (K_MAX + 1). A step's head has one row: row 0, the layout above.
// The softmax's normalizer comes with them (probabilities need the whole vocabulary): each chunk
// also writes its max m and sum of exp(logit - m) to CAND[N_CHUNKS * K_MAX + chunk], and `merge`
// writes the vocabulary's (M, S), S = sum over chunks of s * exp(m - M), to OUT[K_MAX]:
// log_z = M + log(S), taken on the host in double precision.
const NONE: u32 = 0xffffffffu;
const LOWEST: f32 = -0x1.fffffep+127f;  // the lowest finite f32

const CAND_ROW: u32 = N_CHUNKS * (K_MAX + 1u);  // one row's candidates, then its chunks' stats

var<workgroup> vals: array<f32, CHUNK>;
var<workgroup> red_v: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<workgroup> red_s: array<u32, WG>;

fn better(v: f32, i: u32, than_v: f32, than_i: u32) -> bool {
    return v > than_v || (v == than_v && i < than_i);
}

// the workgroup's best (value, id, slot) into red_*[0]
fn reduce_best(lid: u32, v: f32, i: u32, slot: u32) {
    red_v[lid] = v;
    red_i[lid] = i;
    red_s[lid] = slot;
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            if (better(red_v[lid + s], red_i[lid + s], red_v[lid], red_i[lid])) {
                red_v[lid] = red_v[lid + s];
                red_i[lid] = red_i[lid + s];
                red_s[lid] = red_s[lid + s];
            }
        }
        workgroupBarrier();
    }
}

// the workgroup's max (op 0) or sum (op 1) of v into red_v[0]
fn reduce_f32(lid: u32, v: f32, op: u32) {
    red_v[lid] = v;
    workgroupBarrier();
    for (var s = WG_POW2 / 2u; s > 0u; s = s / 2u) {
        if (lid < s && lid + s < WG) {
            if (op == 0u) {
                red_v[lid] = max(red_v[lid], red_v[lid + s]);
            } else {
                red_v[lid] = red_v[lid] + red_v[lid + s];
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wid.x * CHUNK;
    let logits = wid.y * V;
    let cand = wid.y * CAND_ROW;
    for (var j = lid; j < CHUNK; j += WG) {
        vals[j] = select(LOWEST, LOGITS[logits + base + j], base + j < V);
    }
    workgroupBarrier();
    // the chunk's max and sum of exp(logit - max), before the rounds below strike picks out
    var m = LOWEST;
    for (var j = lid; j < CHUNK; j += WG) {
        if (base + j < V) {
            m = max(m, vals[j]);
        }
    }
    reduce_f32(lid, m, 0u);
    let chunk_max = red_v[0];
    workgroupBarrier();  // every invocation has read red_v[0] before it is reused
    var e = 0.0;
    for (var j = lid; j < CHUNK; j += WG) {
        if (base + j < V) {
            e += exp(vals[j] - chunk_max);
        }
    }
    reduce_f32(lid, e, 1u);
    if (lid == 0u) {
        CAND[cand + N_CHUNKS * K_MAX + wid.x] = vec2<u32>(bitcast<u32>(chunk_max), bitcast<u32>(red_v[0]));
    }
    workgroupBarrier();
    let k = min(step.top_k, K_MAX);
    for (var r = 0u; r < k; r++) {
        var v = LOWEST;
        var i = NONE;
        for (var j = lid; j < CHUNK; j += WG) {
            if (base + j < V && vals[j] != LOWEST && better(vals[j], base + j, v, i)) {
                v = vals[j];
                i = base + j;
            }
        }
        reduce_best(lid, v, i, 0u);
        if (lid == 0u) {
            CAND[cand + wid.x * K_MAX + r] = vec2<u32>(red_i[0], bitcast<u32>(red_v[0]));
            if (red_i[0] != NONE) {
                vals[red_i[0] - base] = LOWEST;
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(WG)
fn merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let cand = wid.x * CAND_ROW;
    let out = wid.x * (K_MAX + 1u);
    if (lid == 0u) {  // N_CHUNKS is small (48 for a 49,152-token vocabulary): one invocation
        var big = LOWEST;
        for (var c = 0u; c < N_CHUNKS; c++) {
            big = max(big, bitcast<f32>(CAND[cand + N_CHUNKS * K_MAX + c].x));
        }
        var total = 0.0;
        for (var c = 0u; c < N_CHUNKS; c++) {
            let st = CAND[cand + N_CHUNKS * K_MAX + c];
            total += bitcast<f32>(st.y) * exp(bitcast<f32>(st.x) - big);
        }
        OUT[out + K_MAX] = vec2<u32>(bitcast<u32>(big), bitcast<u32>(total));
    }
    let k = min(step.top_k, K_MAX);
    for (var r = 0u; r < k; r++) {
        var v = LOWEST;
        var i = NONE;
        var slot = 0u;
        for (var f = lid; f < N_CHUNKS * k; f += WG) {
            let at = cand + (f / k) * K_MAX + f % k;
            let c = CAND[at];
            let cv = bitcast<f32>(c.y);
            if (c.x != NONE && better(cv, c.x, v, i)) {
                v = cv;
                i = c.x;
                slot = at;
            }
        }
        reduce_best(lid, v, i, slot);
        if (lid == 0u) {
            OUT[out + r] = vec2<u32>(red_i[0], bitcast<u32>(red_v[0]));
            if (red_i[0] != NONE) {
                CAND[red_s[0]] = vec2<u32>(NONE, bitcast<u32>(LOWEST));
            }
        }
        storageBarrier();  // the next round must see the pick struck out
        workgroupBarrier();
    }
}
