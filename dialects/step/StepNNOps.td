//===- StepNNOps.td - Neural-network step ops -----------------*- tablegen -*-===//
//
// Composite ops that a training step needs as a unit, so that passes and the
// CUDA lowering can treat them as one kernel (and autodiff can give each an
// exact, fused VJP). f16/bf16 inputs are computed in f32.
//
//===----------------------------------------------------------------------===//

class Step_SoftmaxLikeOp<string mnemonic, string torchName>
    : Step_Op<mnemonic, [Pure, InferTypeOpInterface]>,
      Step_SameAsFirstOperandInference {
  let summary = torchName # " along one dim";
  let description = "`" # torchName # "(x, dim)`, computed stably (the max is "
    # "subtracted first).\n\n"
    # "C1: `0 <= dim < rank(operand)`.\n\n"
    # "```mlir\n%p = step." # mnemonic # " %x dim = 1 : tensor<4x10xf32>\n```";
  let arguments = (ins Step_FloatTensor:$operand, I64Attr:$dimension);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
      "$operand `dim` `=` $dimension attr-dict `:` type($operand)";
  let extraClassDeclaration = inferDecl;
  let hasVerifier = 1;
}

def Step_SoftmaxOp : Step_SoftmaxLikeOp<"softmax", "torch.softmax">;
def Step_LogSoftmaxOp : Step_SoftmaxLikeOp<"log_softmax", "torch.log_softmax">;

def Step_LayerNormOp : Step_Op<"layer_norm",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "layer normalization";
  let description = [{
    `torch.nn.functional.layer_norm(x, weight.shape, weight, bias, eps)`:
    normalizes over the trailing `rank(weight)` dims of `x` with the biased
    variance, then scales and shifts.

    C1: `1 <= rank(weight) <= rank(operand)`.
    C2: `weight` has the trailing dims of `operand`.
    C3: `bias` has the type of `weight`.
    C4: all element types are equal.
    C5: `eps > 0`.

    ```mlir
    %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$operand, Step_FloatTensor:$weight,
                       Step_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$operand `,` $weight `,` $bias `eps` `=` $epsilon "
      "attr-dict `:` type($operand) `,` type($weight) `,` type($bias)";
}

def Step_EmbeddingOp : Step_Op<"embedding",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "table look-up";
  let description = [{
    `torch.nn.functional.embedding(indices, weight)`: the result has shape
    `shape(indices) + [D]` for a `[V, D]` table. An index outside `[0, V)` is
    a run-time error.

    C1: `rank(weight) == 2`.

    ```mlir
    %e = step.embedding %tok, %wte : tensor<4x16xi32>, tensor<50257x768xf32> -> tensor<4x16x768xf32>
    ```
  }];
  let arguments = (ins Step_IntTensor:$indices, Step_FloatTensor:$weight);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $weight attr-dict `:` type($indices) `,` "
                       "type($weight) `->` type($result)";
}

def Step_CrossEntropyOp : Step_Op<"cross_entropy",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "softmax cross-entropy loss with integer targets";
  let description = [{
    `torch.nn.functional.cross_entropy(logits, targets, reduction=...,
    ignore_index=...)` for `[N, C]` logits and `[N]` class indices. Rows whose
    target equals `ignore_index` (default -100, as PyTorch) contribute nothing
    and are not counted by `mean`. The result is a scalar for `mean`/`sum`
    and `[N]` for `none`, of the logits' element type.

    C1: `rank(logits) == 2` and `rank(targets) == 1`.
    C2: `dim(logits, 0) == dim(targets, 0)` (or one is dynamic).

    ```mlir
    %l = step.cross_entropy %logits, %y reduction = mean : tensor<32x10xf32>, tensor<32xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$logits, Step_IntTensor:$targets,
                       Step_LossReduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets `reduction` `=` $reduction "
      "(`ignore_index` `=` $ignore_index^)? attr-dict `:` type($logits) `,` "
      "type($targets) `->` type($result)";
  let extraClassDeclaration = [{
    /// ignore_index, or PyTorch's default -100 when absent.
    int64_t getIgnoreIndexOrDefault() {
      return getIgnoreIndex() ? *getIgnoreIndex() : -100;
    }
  }];
}

def Step_DropoutOp : Step_Op<"dropout", [Pure, InferTypeOpInterface]>,
                     Step_SameAsFirstOperandInference {
  let summary = "seeded, reproducible inverted dropout";
  let description = [{
    `torch.nn.functional.dropout(x, p, training=True)` with a counter-based
    mask: element `i` is kept iff a hash of `(key, i)` (splitmix64, see
    `runtime/cpu/Kernels.h`) gives a uniform `u >= p`, where `key = seed +
    offset * 0x9e3779b97f4a7c15` (mod 2^64; `offset` 0 when absent); kept
    elements are scaled by `1 / (1 - p)`. The same seed and offset give the
    same mask on every backend, which is what makes the op pure and its VJP
    exact. `offset` (a rank-0 `i64`) draws a new mask per training step:
    `step-dropout-offset` feeds it the step counter.

    C1: `0 <= p < 1`.
    C2: `offset`, when present, is `tensor<i64>`.

    ```mlir
    %d = step.dropout %x p = 1.0e-01 seed = 42 : tensor<4x8xf32>
    %e = step.dropout %x offset %t p = 1.0e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$operand,
                       Optional<Step_IntTensor>:$offset, F64Attr:$p,
                       I64Attr:$seed);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat =
      "$operand (`offset` $offset^)? `p` `=` $p `seed` `=` $seed attr-dict "
      "`:` type($operand) (`,` type($offset)^)?";
  let extraClassDeclaration = inferDecl;
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Step_AttentionOp : Step_Op<"attention",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "scaled dot-product attention";
  let description = [{
    `torch.nn.functional.scaled_dot_product_attention(q, k, v,
    is_causal=causal, scale=scale)` without dropout: `softmax(q @ k^T * scale
    + mask) @ v`, `scale` defaulting to `1 / sqrt(D)`, and the causal mask
    hiding key `j > i` from query `i` (top-left aligned).

    C1: `rank(query) >= 2` and all three have that rank.
    C2: the element types are equal.
    C3: the leading dims agree; `query` and `key` agree on `D`; `key` and
        `value` agree on `Tk`.
    C4: `scale > 0` when given.
    C5: `valid`, when present, is `tensor<i64>`.

    `valid` (a length L at run time, as `step-pad-dynamic` feeds it)
    makes query rows and keys at positions `>= L` padding: no query sees a
    key `j >= L`, and rows `i >= L` of the result are 0. Kernels skip the
    padded tiles, so the work is that of the first L rows and keys. L is
    clamped to `[0, Tq]` for rows and `[0, Tk]` for keys.

    ```mlir
    %o = step.attention %q, %k, %v causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
    %p = step.attention %q, %k, %v valid %len : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<i64> -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$query, Step_FloatTensor:$key,
                       Step_FloatTensor:$value,
                       Optional<Step_I64Scalar>:$valid, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$query `,` $key `,` $value (`valid` $valid^)? "
      "(`causal` $causal^)? (`scale` `=` $scale^)? attr-dict `:` "
      "type($query) `,` type($key) `,` type($value) (`,` type($valid)^)? "
      "`->` type($result)";
}
