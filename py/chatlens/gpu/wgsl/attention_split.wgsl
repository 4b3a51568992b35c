// attention.wgsl's output for one split of the keys: the exp-weighted sum of values (dims d,
// d + 1 of one head), then the split's max score m and sum of exp(score - m).
// P is (T, NH, SPLITS, HD + 2).
const DIRECT: bool = false;

fn emit(t: u32, head: u32, split: u32, d: u32, o: vec2<f32>, m: f32, l: f32) {
    let at = ((t * NH + head) * SPLITS + split) * (HD + 2u);
    P[at + d] = o.x;
    P[at + d + 1u] = o.y;
    if (d == 0u) {
        P[at + HD] = m;
        P[at + HD + 1u] = l;
    }
}
