// The per-step parameters, one queue.writeBuffer per step (layout: chatlens/gpu/program.py STEP_FIELDS).
struct Step {
    n_tokens: u32,    // T: tokens in this chunk (1 for decode)
    start: u32,       // position of the chunk's first token = tokens already cached
    split: u32,       // keys per attention split (flash decoding)
    use_argmax: u32,  // 1: the token is the id the last argmax wrote (no host round trip)
    top_k: u32,       // how many (id, logit) pairs the top_k kernels find
    // Read only by the *_hidden and score sequences (chatlens.cause's counterfactuals):
    hidden_start: u32,  // the hidden key ranges' envelope: keys outside hidden_start..hidden_end-1
    hidden_end: u32,    // are read (attention compiled with HIDDEN: model.attention's `hidden`)
    score_from: u32,    // the first of the chunk's rows the score sequence scores
    next_id: u32,       // the last row's target (row r's is tokens[r + 1]): NumpyBackend.score's next_id
    n_hidden: u32,      // the hidden ranges [a, b) as pairs after the chunk's ids: tokens[n_tokens + 2r], + 1
    pad1: u32,
    pad2: u32,
    tokens: array<u32>,  // the chunk's ids, then n_hidden (a, b) pairs
}
