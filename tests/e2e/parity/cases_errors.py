"""Parity cases: errors (exit status 1 and a message naming the culprit)."""

from .harness import Case, gen, rng_for, store

# ---------------------------------------------------------------------------
# Error cases: exit status 1 and a message naming the culprit
# ---------------------------------------------------------------------------

def error_cases():
    cases = []
    w = gen(rng_for("err.w"), (10, 4), "f32")
    idx = store([1, 10, 2], "i64")
    cases.append(Case("error.embedding_index_out_of_range", [(idx, "i64"), (w, "f32")],
                      "%r0 = step.embedding %a0, %a1 : tensor<3xi64>, tensor<10x4xf32> -> tensor<3x4xf32>",
                      [((3, 4), "f32")], error=["step.embedding", "10"]))
    idx = store([-1, 0], "i32")
    cases.append(Case("error.embedding_negative_index", [(idx, "i32"), (w, "f32")],
                      "%r0 = step.embedding %a0, %a1 : tensor<2xi32>, tensor<10x4xf32> -> tensor<2x4xf32>",
                      [((2, 4), "f32")], error=["step.embedding", "-1"]))
    x = gen(rng_for("err.shape"), (3, 5), "f32")
    cases.append(Case("error.input_wrong_shape", [(x, "f32", (3, 4))],
                      "%r0 = step.neg %a0 : tensor<3x4xf32>", [((3, 4), "f32")],
                      error=["{inputs}/arg0.npy"]))
    x = gen(rng_for("err.dtype"), (3, 4), "f32")
    cases.append(Case("error.input_wrong_dtype", [(x, "f32", (3, 4), "f16")],
                      "%r0 = step.neg %a0 : tensor<3x4xf16>", [((3, 4), "f16")],
                      error=["{inputs}/arg0.npy"]))
    x = gen(rng_for("err.missing"), (2,), "f32")
    cases.append(Case("error.input_missing", [(x, "f32"), (None, "f32", (2,))],
                      "%r0 = step.add %a0, %a1 : tensor<2xf32>", [((2,), "f32")],
                      error=["{inputs}/arg1.npy"]))
    x = gen(rng_for("err.max"), (0, 3), "f32")
    cases.append(Case("error.reduce_max_empty", [(x, "f32")],
                      "%r0 = step.reduce_max %a0 dims = [0] : tensor<0x3xf32> -> tensor<3xf32>",
                      [((3,), "f32")], error=["step.reduce_max"]))
    a, b = store([1, 2, 3], "i32"), store([1, 0, 1], "i32")
    cases.append(Case("error.integer_div_by_zero", [(a, "i32"), (b, "i32")],
                      "%r0 = step.div %a0, %a1 : tensor<3xi32>", [((3,), "i32")],
                      error=["step.div"]))
    lg, t = gen(rng_for("err.ce"), (2, 3), "f32"), store([0, 3], "i64")
    cases.append(Case("error.cross_entropy_target_out_of_range", [(lg, "f32"), (t, "i64")],
                      "%r0 = step.cross_entropy %a0, %a1 reduction = mean : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>",
                      [((), "f32")], error=["step.cross_entropy"]))
    return cases
