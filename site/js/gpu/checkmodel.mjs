// The known-answer check's model weights, made in the browser: the same bytes as
// py/chatlens/check.py's tensor_bytes, from the spec Python gives (check.spec()), so nothing
// large ships. Element i of a tensor is the integer n = (fmix32(i ^ key) >>> 28) - 8, scaled
// by 2 ** -exponent (a gain: 1 + n / gain_step), stored in the tensor's dtype; every value is
// exact in each. tests/test_check.py holds these bytes to Python's. Plain ES module.

/** MurmurHash3's 32-bit finalizer (check.fmix32). */
export function fmix32(x) {
  x >>>= 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b) >>> 0;
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The f16 bits of a value f16 holds exactly (a normal number or zero: all the check's are). */
function f16(value) {
  f32[0] = value;
  const bits = u32[0];
  if ((bits & 0x7fffffff) === 0) return bits >>> 16;
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  return ((bits >>> 16) & 0x8000) | (exponent << 10) | ((bits >>> 13) & 0x3ff);
}

/** A tensor's bytes (a Uint8Array) as its dtype stores them, from its spec entry ({key, dtype,
 * shape, gain, exponent, nbytes}) and the spec's gain_step. */
export function tensorBytes(entry, gainStep) {
  const n = entry.shape.reduce((a, b) => a * b, 1);
  const key = entry.key >>> 0;
  const ints = new Int8Array(n);
  for (let i = 0; i < n; i++) ints[i] = (fmix32((i ^ key) >>> 0) >>> 28) - 8;
  const scale = entry.gain ? 1 / gainStep : 2 ** -entry.exponent;
  const value = entry.gain ? (i) => 1 + ints[i] * scale : (i) => ints[i] * scale;
  const out = new Uint8Array(entry.nbytes);
  const view = new DataView(out.buffer);
  switch (entry.dtype) {
    case "F32":
      for (let i = 0; i < n; i++) view.setFloat32(4 * i, value(i), true);
      return out;
    case "F16":
      for (let i = 0; i < n; i++) view.setUint16(2 * i, f16(value(i)), true);
      return out;
    case "BF16":
      for (let i = 0; i < n; i++) {
        f32[0] = value(i);
        view.setUint16(2 * i, u32[0] >>> 16, true);
      }
      return out;
    default:
      return blocks(entry.dtype, ints, scale, out, view);
  }
}

/** GGUF's blocks of 32: an f16 scale d (Q4_1: then an f16 minimum m = -8 d), then the quants:
 * Q8_0 each n as an int8; Q4_0 and Q4_1 each n + 8 as a nibble, elements 0..15 low, 16..31 high. */
function blocks(dtype, ints, d, out, view) {
  const size = { Q8_0: 34, Q4_0: 18, Q4_1: 20 }[dtype];
  if (!size) throw new Error(`the check model has no ${dtype} tensor encoder`);
  for (let b = 0, at = 0; b < ints.length / 32; b++, at += size) {
    const first = 32 * b;
    view.setUint16(at, f16(d), true);
    if (dtype === "Q8_0") {
      for (let j = 0; j < 32; j++) view.setInt8(at + 2 + j, ints[first + j]);
      continue;
    }
    let q = at + 2;
    if (dtype === "Q4_1") {
      view.setUint16(at + 2, f16(-8 * d), true);
      q = at + 4;
    }
    for (let j = 0; j < 16; j++) out[q + j] = (ints[first + j] + 8) | ((ints[first + 16 + j] + 8) << 4);
  }
  return out;
}

/** read(file, offset, nbytes) over the check model, for createExecutor: each "file" is one
 * tensor of the spec, made once when first read. */
export function checkReader(spec) {
  const made = new Map();
  return (file, offset, nbytes) => {
    const entry = spec.tensors[file];
    if (!entry) throw new Error(`the check model has no tensor ${file}`);
    if (!made.has(file)) made.set(file, tensorBytes(entry, spec.gain_step));
    return made.get(file).subarray(offset, offset + nbytes);
  };
}
