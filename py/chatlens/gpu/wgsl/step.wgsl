// The per-step parameters, one queue.writeBuffer per step (layout: chatlens/gpu/program.py STEP_FIELDS).
struct Step {
    n_tokens: u32,    // T: tokens in this chunk (1 for decode)
    start: u32,       // position of the chunk's first token = tokens already cached
    split: u32,       // keys per attention split (flash decoding)
    use_argmax: u32,  // 1: the token is the id the last argmax wrote (no host round trip)
    top_k: u32,       // how many (id, logit) pairs the top_k kernels find
    pad0: u32,
    pad1: u32,
    pad2: u32,
    tokens: array<u32>,  // the chunk's ids
}
