// attention.wgsl's output when one workgroup saw every key: softmax(scores) @ v, dims d, d + 1
// of one head. A is (T, NH * HD), heads in order as model.attention returns them.
const DIRECT: bool = true;

fn emit(t: u32, head: u32, split: u32, d: u32, o: vec2<f32>, m: f32, l: f32) {
    let at = (t * NH + head) * HD + d;
    A[at] = o.x / l;
    A[at + 1u] = o.y / l;
}
