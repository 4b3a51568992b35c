// attention.wgsl's output for one split of the keys: the exp-weighted sum of values (dims d,
// d + 1 of one head), then the split's max score m and sum of exp(score - m); merged into
// model.attention's output by attention_merge.wgsl (a chunk) or x_merge.wgsl (one token, as the
// o projection loads it). P is (T, NH, SPLITS, HD) of o, S (T, NH, SPLITS) of (m, l).
const DIRECT: bool = false;

fn emit(t: u32, head: u32, split: u32, d: u32, o: vec2<f32>, m: f32, l: f32) {
    let at = (t * NH + head) * SPLITS + split;
    P[(at * HD + d) / 2u] = o;
    if (d == 0u) {
        S[at] = vec2<f32>(m, l);
    }
}
