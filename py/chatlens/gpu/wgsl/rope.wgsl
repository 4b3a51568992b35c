// Epilogue of the fused q/k/v projection: model.rope on q and k, then k and v written into the
// KV cache at their positions. W holds q, k, v rows (at SEG_Q, SEG_K, SEG_V).
// Virtual rows come in pairs (2p, 2p + 1), the two rows RoPE rotates together with frequency
// p % (HD / 2): HF's rotate-half pairs (i, i + HD/2), or for a GGUF source llama.cpp's adjacent
// pairs (2i, 2i + 1) of its permuted rows. q and k share the order, so q . k is unchanged and
// both stay in the order the weights store them.
// When q, k and v are stored in different precisions they come in separate dispatches: this
// one's virtual rows then start at pair PAIR_BASE of the whole q|k|v order.
// Q is (T, NH * HD); KC, VC are (NKV, N_CTX, HD) in pairs of dims (kv_store_<dtype>.wgsl);
// ROPE is (N_CTX, HD / 2) of (cos, sin).
const HALF: u32 = HD / 2u;
const Q_PAIRS: u32 = NH * HALF;
const K_PAIRS: u32 = NKV * HALF;

fn head_row(p: u32, slot: u32) -> u32 {
    let head = p / HALF;
    let i = p % HALF;
    if (ROPE_HF) {
        return head * HD + i + slot * HALF;
    }
    return head * HD + 2u * i + slot;
}

fn w_row(v: u32) -> vec2<u32> {
    let p = PAIR_BASE + v / 2u;
    let slot = v & 1u;
    if (p < Q_PAIRS) {
        return vec2<u32>(SEG_Q, head_row(p, slot));
    }
    if (p < Q_PAIRS + K_PAIRS) {
        return vec2<u32>(SEG_K, head_row(p - Q_PAIRS, slot));
    }
    return vec2<u32>(SEG_V, 2u * (p - Q_PAIRS - K_PAIRS) + slot);
}

// Pairs come two at a time (ROWS is a multiple of 4, v0 of ROWS): the cache is written a pair of
// dims (2i, 2i + 1) at a time (one u32 of f16), and two neighbouring pairs fill whole pairs in
// either order.
fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    let pos = step.start + t;
    for (var j = 0u; j < ROWS / 2u; j += 2u) {
        let p = PAIR_BASE + v0 / 2u + j;
        if (v0 + 2u * j >= NV) {
            break;
        }
        var a = vec2<f32>(y[2u * j], y[2u * j + 2u]);  // slot 0 of pairs p, p + 1
        var b = vec2<f32>(y[2u * j + 1u], y[2u * j + 3u]);  // slot 1
        if (p < Q_PAIRS + K_PAIRS) {
            let cs0 = ROPE[pos * HALF + p % HALF];
            let cs1 = ROPE[pos * HALF + (p + 1u) % HALF];
            let c = vec2<f32>(cs0.x, cs1.x);
            let s = vec2<f32>(cs0.y, cs1.y);
            let ra = a * c - b * s;
            let rb = b * c + a * s;
            a = ra;
            b = rb;
        }
        if (p < Q_PAIRS) {
            for (var i = 0u; i < 2u; i++) {
                Q[t * NH * HD + head_row(p + i, 0u)] = a[i];
                Q[t * NH * HD + head_row(p + i, 1u)] = b[i];
            }
        } else if (p < Q_PAIRS + K_PAIRS) {
            let pk = p - Q_PAIRS;
            let base = ((pk / HALF) * N_CTX + pos) * HD - (pk / HALF) * HD;
            if (ROPE_HF) {  // dims i, i + 1 and i + HALF, i + 1 + HALF
                store_k((base + head_row(pk, 0u)) / 2u, a);
                store_k((base + head_row(pk, 1u)) / 2u, b);
            } else {  // dims 2i, 2i + 1 and 2i + 2, 2i + 3
                store_k((base + head_row(pk, 0u)) / 2u, vec2<f32>(a.x, b.x));
                store_k((base + head_row(pk + 1u, 0u)) / 2u, vec2<f32>(a.y, b.y));
            }
        } else {
            let row = 2u * (p - Q_PAIRS - K_PAIRS);
            let base = ((row / HD) * N_CTX + pos) * HD + row % HD;
            store_v(base / 2u, vec2<f32>(a.x, b.x));
            store_v(base / 2u + 1u, vec2<f32>(a.y, b.y));
        }
    }
}
