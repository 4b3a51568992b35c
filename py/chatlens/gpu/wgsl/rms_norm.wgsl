// model.rms_norm folded into the projection that follows it: the kernel multiplies x by the
// gain G as it loads x, sums x*x on the way, and scales each dot product by this factor.
fn rms_scale(sum_sq: f32) -> f32 {
    return 1.0 / sqrt(sum_sq / f32(K) + EPS);
}
