//===- StepTrainOps.td - Gradient and optimizer step ops ------*- tablegen -*-===//
//
// Ops that only a training step has: the gradient barrier, the fused
// backward kernels that autodiff emits where a decomposition into primitive
// ops would be slower, less exact or larger (embedding, cross-entropy,
// attention), the overflow
// check of dynamic loss scaling, and one fused update op per parameter for
// each optimizer. Optimizer ops and the overflow check have no VJP.
//
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

def Step_StopGradientOp : Step_Op<"stop_gradient",
    [Pure, InferTypeOpInterface]>, Step_SameAsFirstOperandInference {
  let summary = "identity that blocks gradients";
  let description = [{
    `x.detach()`: returns its operand unchanged; `step-autodiff` sends no
    gradient through it, so everything computed from the operand alone is
    treated as a constant by the backward pass.

    C1: the result type equals the operand type.

    ```mlir
    %t = step.stop_gradient %x : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let extraClassDeclaration = inferDecl;
}

def Step_EmbeddingGradOp : Step_Op<"embedding_grad",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "gradient of step.embedding w.r.t. its table (scatter-add)";
  let description = [{
    The table gradient of `torch.nn.functional.embedding`: a `[V, D]` tensor
    of zeros to which row `grad[i...]` is added at row `indices[i...]`, for
    every index position (repeated indices accumulate). Accumulates in f32
    for f16/bf16 and rounds once. An index outside `[0, V)` is a run-time
    error.

    C1: `shape(grad) == shape(indices) + [D]`.
    C2: `num_embeddings >= 1`.

    ```mlir
    %dw = step.embedding_grad %tok, %g num_embeddings = 50257 : tensor<4x16xi32>, tensor<4x16x768xf32> -> tensor<50257x768xf32>
    ```
  }];
  let arguments = (ins Step_IntTensor:$indices, Step_FloatTensor:$grad,
                       I64Attr:$num_embeddings);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $grad `num_embeddings` `=` "
      "$num_embeddings attr-dict `:` type($indices) `,` type($grad) `->` "
      "type($result)";
}

def Step_CrossEntropyGradOp : Step_Op<"cross_entropy_grad",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "gradient of step.cross_entropy w.r.t. the logits";
  let description = [{
    The fused softmax-gradient of `torch.nn.functional.cross_entropy`:
    row `i` of the result is `(softmax(logits[i]) - onehot(targets[i])) * s_i`
    where `s_i` is `grad` (reduction `sum`), `grad / count` (`mean`, `count`
    the number of rows whose target is not `ignore_index`) or `grad[i]`
    (`none`); ignored rows are zero. Attributes mean what they mean on
    `step.cross_entropy`.

    C1: `rank(logits) == 2` and `rank(targets) == 1`, agreeing on N.
    C2: `grad` is a scalar for `mean`/`sum` and `[N]` for `none`, of the
        logits' element type.

    ```mlir
    %dl = step.cross_entropy_grad %logits, %y, %g reduction = mean : tensor<32x10xf32>, tensor<32xi64>, tensor<f32> -> tensor<32x10xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$logits, Step_IntTensor:$targets,
                       Step_FloatTensor:$grad,
                       Step_LossReduction:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets `,` $grad `reduction` `=` "
      "$reduction (`ignore_index` `=` $ignore_index^)? attr-dict `:` "
      "type($logits) `,` type($targets) `,` type($grad) `->` type($result)";
  let extraClassDeclaration = [{
    /// ignore_index, or PyTorch's default -100 when absent.
    int64_t getIgnoreIndexOrDefault() {
      return getIgnoreIndex() ? *getIgnoreIndex() : -100;
    }
  }];
}

def Step_AttentionLseOp : Step_Op<"attention_lse",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "step.attention that also returns each row's log-sum-exp";
  let description = [{
    `step.attention`'s result, and `lse`: per query row, the log of the sum
    of the exponentials of its scaled, masked scores (`m + log(sum exp(s -
    m))`, `m` the row's largest score), as FlashAttention's forward saves
    it for the backward; 0 for a padded row (`valid`) or a row that sees no
    key. `step-attention-stats` forms it from a `step.attention` whose
    gradient is taken, so that `step.attention_grad` (its `saved`
    operands) need not recompute the statistics. Attributes, operands and
    C1-C5 are `step.attention`'s.

    C6: `lse` is f32 and has `query`'s shape without its last dim.

    ```mlir
    %o, %lse = step.attention_lse %q, %k, %v causal : tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16> -> tensor<2x4x16x8xbf16>, tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$query, Step_FloatTensor:$key,
                       Step_FloatTensor:$value,
                       Optional<Step_I64Scalar>:$valid, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Step_FloatTensor:$result, F32Tensor:$lse);
  let assemblyFormat = "$query `,` $key `,` $value (`valid` $valid^)? "
      "(`causal` $causal^)? (`scale` `=` $scale^)? attr-dict `:` "
      "type($query) `,` type($key) `,` type($value) (`,` type($valid)^)? "
      "`->` type($result) `,` type($lse)";
}

def Step_AttentionGradOp : Step_Op<"attention_grad",
    [Pure, AttrSizedOperandSegments,
     DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "gradients of step.attention w.r.t. query, key and value";
  let description = [{
    The backward of `torch.nn.functional.scaled_dot_product_attention` (as
    PyTorch's autograd computes it) without the `[..., Tq, Tk]` scores or
    probabilities as tensors: with `P = softmax(q @ k^T * scale + mask)`
    and `grad` the gradient of the attention's result,
    `dvalue = P^T @ grad`, `dS = P * (grad @ value^T - rowsum(...))`,
    `dquery = dS @ key * scale`, `dkey = dS^T @ query * scale`. Attributes
    and constraints C1-C4 are those of `step.attention` on the first three
    operands; f16/bf16 operands are computed in f32 and each gradient is
    rounded once to its operand's type.

    C5: `grad` has the shape and element type of the attention's result
        (`query`'s shape with `value`'s last dim).
    C6: `valid`, when present, is `tensor<i64>`: the padding of
        `step.attention`'s `valid`; the gradients' rows at positions
        `>= L` are 0, and padded tiles are skipped.
    C7: `saved`, when present, is the forward's result (the attention
        result's type) and its `lse` (`step.attention_lse`'s): the kernels
        take the row statistics from them (`lse`, and `rowsum(grad *
        out)` for `rowsum(P * dP)`, equal up to rounding) instead of a pass
        over the keys.

    ```mlir
    %dq, %dk, %dv = step.attention_grad %q, %k, %v, %g causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
    %a:3 = step.attention_grad %q, %k, %v, %g saved(%o, %lse : tensor<2x4x16x8xf32>, tensor<2x4x16xf32>) causal : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$query, Step_FloatTensor:$key,
                       Step_FloatTensor:$value, Step_FloatTensor:$grad,
                       Optional<Step_I64Scalar>:$valid,
                       Optional<Step_FloatTensor>:$out,
                       Optional<F32Tensor>:$lse, UnitAttr:$causal,
                       OptionalAttr<F64Attr>:$scale);
  let results = (outs Step_FloatTensor:$dquery, Step_FloatTensor:$dkey,
                      Step_FloatTensor:$dvalue);
  // The saved operands carry their types inline: a `,`-led group of them
  // after valid's would not parse apart from valid's.
  let assemblyFormat = "$query `,` $key `,` $value `,` $grad "
      "(`valid` $valid^)? (`saved` `(` $out^ `,` $lse `:` type($out) `,` "
      "type($lse) `)`)? (`causal` $causal^)? (`scale` `=` $scale^)? "
      "attr-dict `:` type($query) `,` type($key) `,` type($value) `,` "
      "type($grad) (`,` type($valid)^)? `->` type($dquery) `,` "
      "type($dkey) `,` type($dvalue)";
}

//===----------------------------------------------------------------------===//
// Mixed precision
//===----------------------------------------------------------------------===//

def Step_CheckFiniteOp : Step_Op<"check_finite",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "whether every element of every operand is finite";
  let description = [{
    The overflow check of dynamic loss scaling: true iff no element of any
    operand is NaN, +inf or -inf. It is the negation of the `found_inf` flag
    that `torch.cuda.amp.GradScaler` computes over all gradients, i.e.
    `all(torch.isfinite(t).all() for t in operands)`. Elements are tested in
    their own type (an f16/bf16 value is finite iff its exponent bits are not
    all ones), so nothing is rounded; an empty operand contributes true. One
    op over the whole list lets the CUDA lowering check every gradient in one
    launch. Its result is i1 and carries no gradient.

    C1: at least one operand.
    C2: every operand is a ranked f32, f16 or bf16 tensor (shapes and element
        types may differ between operands).
    C3: the result is `tensor<i1>` (rank 0).

    ```mlir
    %ok = step.check_finite %g0, %g1 : tensor<4xf32>, tensor<2x3xbf16>
    ```
  }];
  let arguments = (ins Variadic<Step_FloatTensor>:$inputs);
  let results = (outs 0DTensorOf<[I1]>:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs)";
}

//===----------------------------------------------------------------------===//
// Optimizer updates (one fused op per parameter)
//===----------------------------------------------------------------------===//

def Step_SgdUpdateOp : Step_Op<"sgd_update",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "one torch.optim.SGD step for one parameter";
  let description = [{
    `torch.optim.SGD(lr, momentum, dampening, weight_decay, nesterov)` for
    one parameter, with `lr` a run-time scalar (the LR schedule's value) and
    `step` the 1-based number of this update:

        g = grad + weight_decay * param
        if momentum != 0:
          buf = g                                   if step == 1
                momentum * buf + (1 - dampening) * g otherwise
          g = g + momentum * buf if nesterov else buf
        new_param = param - lr * g

    The momentum buffer operand and result are present iff `momentum != 0`.
    Computed in f32 per element.

    C1: `grad` (and the buffer) have the type of `param`.
    C2: `step` is `tensor<i64>` and `lr` is `tensor<f32>`.
    C3: the momentum buffer is present iff `momentum != 0`.
    C4: `nesterov` needs `momentum > 0` and `dampening == 0` (as PyTorch).

    ```mlir
    %p1, %b1 = step.sgd_update %p, %g, %t, %lr momentum_buffer %b {momentum = 9.000000e-01 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Step_FloatTensor:$param, Step_FloatTensor:$grad,
                       Step_I64Scalar:$step, Step_F32Scalar:$lr,
                       Optional<Step_FloatTensor>:$momentum_buffer,
                       DefaultValuedAttr<F64Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F64Attr, "0.0">:$dampening,
                       DefaultValuedAttr<F64Attr, "0.0">:$weight_decay,
                       UnitAttr:$nesterov);
  let results = (outs Step_FloatTensor:$new_param,
                      Optional<Step_FloatTensor>:$new_momentum_buffer);
  let assemblyFormat = "$param `,` $grad `,` $step `,` $lr "
      "(`momentum_buffer` $momentum_buffer^)? attr-dict `:` "
      "functional-type(operands, results)";
  let hasVerifier = 1;
}

class Step_AdamLikeOp<string mnemonic, string eps>
    : Step_Op<mnemonic, [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>,
                         AllTypesMatch<["param", "grad", "exp_avg",
                                        "exp_avg_sq"]>]> {
  let arguments = (ins Step_FloatTensor:$param, Step_FloatTensor:$grad,
                       Step_FloatTensor:$exp_avg, Step_FloatTensor:$exp_avg_sq,
                       Step_I64Scalar:$step, Step_F32Scalar:$lr,
                       DefaultValuedAttr<F64Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F64Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F64Attr, eps>:$eps,
                       DefaultValuedAttr<F64Attr, "0.01">:$weight_decay);
  let results = (outs Step_FloatTensor:$new_param,
                      Step_FloatTensor:$new_exp_avg,
                      Step_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = "$param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` "
      "$step `,` $lr attr-dict `:` type($param) `,` type($step) `,` "
      "type($lr)";
  let hasVerifier = 1;
}

def Step_AdamwUpdateOp : Step_AdamLikeOp<"adamw_update", "1.0e-8"> {
  let summary = "one torch.optim.AdamW step for one parameter";
  let description = [{
    `torch.optim.AdamW(lr, betas=(beta1, beta2), eps, weight_decay)` (no
    amsgrad) for one parameter; `lr` is a run-time scalar and `step` the
    1-based number of this update. Defaults are PyTorch's. Per element, in f32:

        param    = param * (1 - lr * weight_decay)        (decoupled decay)
        exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
        exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
        denom = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps
        new_param = param - lr / (1 - beta1^step) * exp_avg / denom

    C1: `grad`, `exp_avg`, `exp_avg_sq` have the type of `param`.
    C2: `step` is `tensor<i64>` and `lr` is `tensor<f32>`.
    C3: `0 <= beta1, beta2 < 1`, `eps > 0`, `weight_decay >= 0`.

    ```mlir
    %p1, %m1, %v1 = step.adamw_update %p, %g, %m, %v, %t, %lr : tensor<8xf32>, tensor<i64>, tensor<f32>
    ```
  }];
}

def Step_LambUpdateOp : Step_AdamLikeOp<"lamb_update", "1.0e-6"> {
  let summary = "one LAMB step for one parameter";
  let description = [{
    LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning"),
    with Adam's bias correction and a layer-wise trust ratio; PyTorch has no
    LAMB, so the formula is the paper's (as NVIDIA Apex's FusedLAMB without
    its global gradient clipping). In f32, norms accumulated in double:

        exp_avg    = beta1 * exp_avg + (1 - beta1) * grad
        exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad^2
        r = (exp_avg / (1 - beta1^step)) /
            (sqrt(exp_avg_sq / (1 - beta2^step)) + eps) + weight_decay * param
        trust = |param| / |r| if both norms are > 0, else 1
        new_param = param - lr * trust * r

    C1: `grad`, `exp_avg`, `exp_avg_sq` have the type of `param`.
    C2: `step` is `tensor<i64>` and `lr` is `tensor<f32>`.
    C3: `0 <= beta1, beta2 < 1`, `eps > 0`, `weight_decay >= 0`.

    ```mlir
    %p1, %m1, %v1 = step.lamb_update %p, %g, %m, %v, %t, %lr {weight_decay = 0.0 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Memory placement
//===----------------------------------------------------------------------===//

def Step_OffloadOp : Step_Op<"offload",
    [Pure, InferTypeOpInterface]>, Step_SameAsFirstOperandInference {
  let summary = "copy of a device value into host memory";
  let description = [{
    Returns its operand unchanged, held in (pinned) host memory instead of
    the device arena: `step-offload` puts a forward value the backward reads
    there, so its device bytes are free between the forward and the
    backward. The copy starts as soon as the operand is computed (on a copy
    stream, overlapped with the ops that follow) and has finished when this
    op is reached, so the operand's device memory lives until here. Only
    `step.reload`, ops computed on the host (`step.host`, set by
    `step-offload-optimizer`) and the return of a result held in host
    memory may read it. Identity for every
    dtype; its VJP passes the gradient through.

    C1: the result type equals the operand type.
    C2: every user of the result is a `step.reload`, a `step.host` op or
        a `func.return` (a result held in host memory), so a host value
        is never offloaded again, and no device kernel reads one.

    ```mlir
    %h = step.offload %x : tensor<8x768xbf16>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let extraClassDeclaration = inferDecl;
  let hasVerifier = 1;
}

def Step_ReloadOp : Step_Op<"reload",
    [Pure, InferTypeOpInterface]>, Step_SameAsFirstOperandInference {
  let summary = "copy of an offloaded value back into device memory";
  let description = [{
    Returns its operand, a host value (made by `step.offload` or by a
    `step.host` op, or a function argument with `step.memory = "host"`),
    in the device arena again. The copy starts when this op is reached (its result's
    device memory lives from here) and runs on a copy stream while the
    following ops compute; the first op reading the result waits for it.
    Identity for every dtype; its VJP passes the gradient through.

    C1: the result type equals the operand type.
    C2: the operand is a host value.

    ```mlir
    %x2 = step.reload %h : tensor<8x768xbf16>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand)";
  let extraClassDeclaration = inferDecl;
  let hasVerifier = 1;
}
