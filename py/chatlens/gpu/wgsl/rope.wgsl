// Epilogue of the fused q/k/v projection: model.rope on q and k, then k and v written into the
// KV cache at their positions. W holds q, k, v rows (at SEG_Q, SEG_K, SEG_V).
// Virtual rows come in pairs (2p, 2p + 1), the two rows RoPE rotates together with frequency
// p % (HD / 2): HF's rotate-half pairs (i, i + HD/2), or for a GGUF source llama.cpp's adjacent
// pairs (2i, 2i + 1) of its permuted rows. q and k share the order, so q . k is unchanged and
// both stay in the order the weights store them.
// When q, k and v are stored in different precisions they come in separate dispatches: this
// one's virtual rows then start at pair PAIR_BASE of the whole q|k|v order.
// Q is (T, NH * HD); KC, VC are (NKV, N_CTX, HD); ROPE is (N_CTX, HD / 2) of (cos, sin).
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

fn finish(t: u32, v0: u32, y: array<f32, ROWS>) {
    let pos = step.start + t;
    for (var j = 0u; j < ROWS / 2u; j++) {
        let p = PAIR_BASE + v0 / 2u + j;
        if (v0 + 2u * j >= NV) {
            break;
        }
        var a = y[2u * j];
        var b = y[2u * j + 1u];
        if (p < Q_PAIRS + K_PAIRS) {
            let cs = ROPE[pos * HALF + p % HALF];
            let ra = a * cs.x - b * cs.y;
            let rb = b * cs.x + a * cs.y;
            a = ra;
            b = rb;
        }
        if (p < Q_PAIRS) {
            Q[t * NH * HD + head_row(p, 0u)] = a;
            Q[t * NH * HD + head_row(p, 1u)] = b;
        } else if (p < Q_PAIRS + K_PAIRS) {
            let pk = p - Q_PAIRS;
            let base = ((pk / HALF) * N_CTX + pos) * HD - (pk / HALF) * HD;
            KC[base + head_row(pk, 0u)] = a;
            KC[base + head_row(pk, 1u)] = b;
        } else {
            let row = 2u * (p - Q_PAIRS - K_PAIRS);
            let base = ((row / HD) * N_CTX + pos) * HD + row % HD;
            VC[base] = a;
            VC[base + 1u] = b;
        }
    }
}
