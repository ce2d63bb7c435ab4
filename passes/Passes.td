//===- Passes.td - StepJIT passes --------------------------*- tablegen -*-===//
//
// Every pass of the pipeline (DESIGN.md section 4), one .cpp each, grouped by
// stage and alphabetical within a group.
//
//===----------------------------------------------------------------------===//
#ifndef STEP_PASSES_TD
#define STEP_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Training step
//===----------------------------------------------------------------------===//

def Autodiff : Pass<"step-autodiff", "::mlir::ModuleOp"> {
  let summary = "Builds the joint forward+backward function of @forward";
  let description = [{
    Adds `func.func @forward_backward` next to `@forward`: the same
    arguments, returning `@forward`'s results followed by the gradient of the
    loss (result 0) with respect to every `{step.kind = "param"}` argument,
    named `grad.<param>`. The backward pass is reverse mode: one VJP rule per
    op (dialects/step/VJP*.cpp), cotangents of values used more than once are
    summed, and only ops on a path from a param to the loss are
    differentiated.

    Before:
    ```mlir
    func.func @forward(%w: tensor<4xf32> {step.kind = "param", step.name = "w"}, ...)
        -> tensor<f32>
    ```
    After (in addition):
    ```mlir
    func.func @forward_backward(%w: tensor<4xf32> {...}, ...)
        -> (tensor<f32> {step.name = "loss"}, tensor<4xf32> {step.kind = "grad", step.name = "grad.w"})
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "the model function to differentiate">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def GradAccum : Pass<"step-grad-accum", "::mlir::ModuleOp"> {
  let summary = "K micro-batches per update inside one step";
  let description = [{
    Replaces `@forward_backward` (from step-autodiff) by a function taking
    inputs whose leading (batch) dim is `k` times larger. It slices the k
    micro-batches along dim 0, calls the original function (kept as the
    private `@forward_backward_micro`) once per micro-batch, and returns
    the mean of the k losses and the mean of the k gradients, summed in f32
    (the gradient of loss/k summed over micro-batches). For a loss that is a
    mean over the batch, this equals one step on the k-times larger batch.
  }];
  let options = [
    Option<"k", "k", "int64_t", "1", "micro-batches per update (>= 1)">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def Optimizer : Pass<"step-optimizer", "::mlir::ModuleOp"> {
  let summary = "Builds @train_step: gradients, clipping, LR schedule, updates";
  let description = [{
    Adds `func.func @train_step(params..., state..., inputs...) -> (loss, new
    params..., new state...)` calling `@forward_backward`, then: increments
    the step counter `opt.step`, evaluates the LR schedule from it, clips the
    gradients to a global L2 norm (when `clip > 0`), and updates every param
    with one fused `step.sgd_update`/`step.adamw_update`/`step.lamb_update`.
    Optimizer state is `{step.kind = "state"}` arguments and results (see
    compiler/pipeline/Train.h for names). Hyper-parameter defaults are
    PyTorch's; negative values mean "the optimizer's default".
    With `guard-finite`, one more result `guard.finite` (last) says whether
    the loss and the gradients (unscaled, before clipping) are finite, for
    the runtime's non-finite guard (runtime/FiniteGuard.h).
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "sgd | adamw | lamb">,
    Option<"lr", "lr", "double", "1e-3", "base learning rate">,
    Option<"beta1", "beta1", "double", "-1", "Adam beta1 (default 0.9)">,
    Option<"beta2", "beta2", "double", "-1", "Adam beta2 (default 0.999)">,
    Option<"eps", "eps", "double", "-1",
           "Adam eps (default 1e-8; LAMB 1e-6)">,
    Option<"weightDecay", "weight-decay", "double", "-1",
           "weight decay (default AdamW/LAMB 0.01, SGD 0)">,
    Option<"momentum", "momentum", "double", "0", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"decayVectors", "decay-vectors", "bool", "true",
           "apply weight decay to params of rank < 2 too (biases, norms); "
           "false: only to matrices and embeddings, as nanoGPT's param groups">,
    Option<"clip", "clip", "double", "0",
           "max global gradient L2 norm (0 = no clipping)">,
    Option<"schedule", "schedule", "std::string", "\"constant\"",
           "constant | cosine | linear">,
    Option<"warmup", "warmup", "int64_t", "0", "linear warmup updates">,
    Option<"total", "total", "int64_t", "0",
           "updates until the decay ends (cosine, linear)">,
    Option<"minRatio", "min-ratio", "double", "0",
           "final LR as a fraction of lr (cosine, linear)">,
    Option<"guardFinite", "guard-finite", "bool", "false",
           "also return `guard.finite` (tensor<i1>): the loss and every "
           "gradient are finite (with dynamic loss scaling: the loss, and "
           "the gradients once the scale is <= 1); docs/training.md">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Dynamic shapes
//===----------------------------------------------------------------------===//

def PadDynamic : Pass<"step-pad-dynamic", "::mlir::ModuleOp"> {
  let summary = "Pads symbolic dims to a bucket, masked so results are exact";
  let description = [{
    Makes a model whose dims are symbolic (`?` named by `step.dims`, maxima
    in the function's `step.symbols`) static: every symbol S becomes its
    bucket size, a new argument `len.S` (`tensor<i64>`, `{step.kind =
    "input", step.len_of = "S"}`) carries the valid length at run time, and
    every op that mixes positions along a padded dim reads its operand
    through a select against `iota < len.S`, so the results (and their
    gradients) equal those of the unpadded model. Ops it cannot make exact
    are refused with an error. See docs/dynamic-shapes.md.

    Before:
    ```mlir
    func.func @forward(%x: tensor<?x4xf32> {step.kind = "input", step.name = "x",
                                            step.dims = ["T", ""]}) -> tensor<f32>
        attributes {step.symbols = {T = 64 : i64}} {
      %m = step.reduce_mean %x dims = [0, 1] : tensor<?x4xf32> -> tensor<f32>
    ```
    After (`sizes=T=16`):
    ```mlir
    func.func @forward(%x: tensor<16x4xf32> {...}, %len: tensor<i64> {step.kind = "input",
                       step.name = "len.T", step.len_of = "T"}) -> tensor<f32>
        attributes {step.buckets = {T = 16 : i64}} {
      %mask = ... iota < len.T ...
      %s = step.reduce_sum (step.select %mask, %x, 0) dims = [0, 1]
      %m = step.div %s, (cast (4 * len.T))
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "the model function to pad">,
    ListOption<"sizes", "sizes", "std::string",
               "bucket size per symbol as SYMBOL=SIZE (default: the "
               "symbol's maximum)">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Planning
//===----------------------------------------------------------------------===//

def MemoryPlan : Pass<"step-memory-plan", "::mlir::ModuleOp"> {
  let summary = "Places every transient value of a function in one arena";
  let description = [{
    Computes the live range of every op result of the function (from its
    definition to its last use; function results live to the end) and
    assigns each one a byte offset in a single arena so that values whose
    live ranges overlap never share bytes. Constants (the artifact's
    constant section) and arguments (params, state, inputs: persistent or
    caller-owned) are not in the arena.

    Annotates each op with `step.offsets = array<i64: ...>` (one offset per
    result) and the function with `step.arena_bytes` (the planned peak) and
    `step.arena_bytes_no_reuse` (the sum of all transient sizes, for the
    report).

    ```mlir
    %1 = step.exp %0 {step.offsets = array<i64: 256>} : tensor<64xf32>
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the function to plan">,
    Option<"alignment", "alignment", "int64_t", "256",
           "byte alignment of every offset (a power of two)">,
  ];
}

//===----------------------------------------------------------------------===//
// step-amp
//===----------------------------------------------------------------------===//

def Amp : Pass<"step-amp", "::mlir::ModuleOp"> {
  let summary = "Mixed precision: casts by one policy table, f32 master "
                "weights, dynamic loss scaling for fp16";
  let description = [{
    Rewrites @forward (before step-autodiff) so that matmul and attention
    compute in bf16 or f16, softmax/log_softmax/layer_norm/reductions/
    exp/log/cross_entropy in f32, and everything else in the type of its
    activations (docs/amp.md). Params stay f32; casts are made once per
    value and type. With dynamic loss scaling (fp16 by default) the loss is
    multiplied by the new state argument `amp.loss_scale`, and `step.amp`
    on @forward tells step-optimizer to unscale, skip non-finite steps and
    update the scale.
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"bf16\"",
           "the 16-bit type: bf16 or fp16">,
    ListOption<"keepF32", "keep-f32", "std::string",
               "op names (layer_norm, softmax, ...) always computed in f32">,
    Option<"lossScale", "loss-scale", "std::string", "\"auto\"",
           "auto (dynamic for fp16, none for bf16), none or dynamic">,
    Option<"initScale", "init-scale", "double", "65536.0",
           "the initial loss scale (GradScaler's init_scale)">,
    Option<"growthFactor", "growth-factor", "double", "2.0",
           "scale multiplier after growth-interval clean steps">,
    Option<"backoffFactor", "backoff-factor", "double", "0.5",
           "scale multiplier after a step with an inf/NaN gradient">,
    Option<"growthInterval", "growth-interval", "int64_t", "2000",
           "clean steps before the scale grows">,
  ];
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def Offload : Pass<"step-offload", "::mlir::ModuleOp"> {
  let summary = "Moves saved activations to host memory between forward and backward";
  let description = [{
    On a one-block training step (after step-remat, before step-fuse),
    copies forward values that the backward reads into host memory with
    `step.offload` right after they are computed and brings them back with
    `step.reload` ahead of their first backward use, on copy streams
    overlapped with compute, so they hold no device memory in between.

    Modes: `none` offloads nothing; `auto` offloads the largest values
    whose copies a cost model (FLOPs and bytes per op against
    `device-flops`, `memory-bandwidth` and `link-bandwidth`) hides under
    compute, within `max-exposed` of the modeled step time; `all` offloads
    every value that frees device memory. The result is checked against
    the memory plan (undone if the arena does not shrink) and recorded in a
    `step.offload` dictionary on the function.

    ```mlir
    %h = step.offload %x : tensor<8x768xbf16>
    ...
    %x2 = step.reload %h : tensor<8x768xbf16>
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"", "none | auto | all">,
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the training step to rewrite">,
    Option<"linkBandwidth", "link-bandwidth", "double", "25e9",
           "host<->device bytes per second, each direction (PCIe 4.0 x16)">,
    Option<"deviceFlops", "device-flops", "double", "200e12",
           "FLOP/s the device sustains on matmuls">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", "2e12",
           "device memory bytes per second">,
    Option<"maxExposed", "max-exposed", "double", "0.0",
           "mode auto: the share of the modeled step time copies may add">,
    Option<"minBytes", "min-bytes", "int64_t", "0",
           "values smaller than this stay on the device">,
    Option<"fuse", "fuse", "bool", "true",
           "measure the plan after step-fuse (as the pipeline will run it)">,
    Option<"geluEpilogues", "gelu-epilogues", "bool", "false",
           "the step-fuse option of the same name, for that measurement">,
    Option<"bgradEpilogues", "bgrad-epilogues", "bool", "false",
           "run step-fuse-bias-grad too, for that measurement">,
    Option<"alignment", "alignment", "int64_t", "256",
           "byte alignment of the memory plan measured">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def LayerNormStats : Pass<"step-layer-norm-stats", "::mlir::ModuleOp"> {
  let summary = "Hands each layer norm's mean and rstd to its gradient";
  let description = [{
    On the inlined training step, writes every `step.layer_norm` whose
    gradient recomputes its statistics (a `step.reduce_mean` of its operand
    over the normalized dims) as the primitive ops the VJP rule builds them
    with, then runs CSE: the gradient reads the forward's row mean and
    rsqrt(var + eps) instead of two more dependent row reductions, as
    PyTorch's native_layer_norm saves them for its backward.

    ```mlir
    %y = step.layer_norm %x, %w, %b eps = 1.0e-05 : ...
    %m = step.reduce_mean %x dims = [1] : ...   // the gradient's
    // becomes
    %m = step.reduce_mean %x dims = [1] : ...   // read by both
    %c = step.sub %x, %mb ...
    ...
    %y = step.add %s, %bb ...
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the training step to rewrite">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def AttentionStats : Pass<"step-attention-stats", "::mlir::ModuleOp"> {
  let summary = "Saves each attention's log-sum-exp for its gradient";
  let description = [{
    On the inlined training step, turns every `step.attention` whose
    gradient is taken (a `step.attention_grad` of the same q, k, v, valid
    length, mask and scale) into `step.attention_lse` and hands its result
    and log-sum-exp to those gradients as their `saved` operands, as
    FlashAttention's forward saves its row statistics: the gradient kernels
    then skip their pass over the keys that recomputes them.

    ```mlir
    %o = step.attention %q, %k, %v causal : ...
    %dq, %dk, %dv = step.attention_grad %q, %k, %v, %g causal : ...
    // becomes
    %o, %lse = step.attention_lse %q, %k, %v causal : ...
    %dq, %dk, %dv = step.attention_grad %q, %k, %v, %g saved(%o, %lse : ...) causal : ...
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the training step to rewrite">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def DropoutOffset : Pass<"step-dropout-offset", "::mlir::ModuleOp"> {
  let summary = "Feeds every dropout the step counter: a new mask per update";
  let description = [{
    On the inlined training step, sets the `offset` of every `step.dropout`
    that has none to the `opt.step` argument (updates done so far), so the
    mask changes every update while the first update (offset 0) keeps the
    seed's mask; one step-grad-accum fed micro-batch j's index (marked
    `step.micro_batches = K`) gets `opt.step * K + j`. The forward's
    dropout and its VJP read the same offset.

    ```mlir
    %d = step.dropout %x p = 1.0e-01 seed = 42 : tensor<4x8xf32>
    // becomes
    %d = step.dropout %x offset %t p = 1.0e-01 seed = 42 : tensor<4x8xf32>, tensor<i64>
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the training step to rewrite">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def OffloadOptimizer : Pass<"step-offload-optimizer", "::mlir::ModuleOp"> {
  let summary = "ZeRO-Offload: optimizer state and update on the host CPU";
  let description = [{
    On the final one-block training step (after step-fuse), keeps the
    params and the optimizer state in (pinned) host memory
    (`step.memory = "host"` on their arguments and results) and computes
    the optimizer update there: every update op (or fusion holding one) and
    every op computed from optimizer state and host values alone gets
    `step.host`. Device values a host op reads are copied out with
    `step.offload` just before it (the copy starts when the value is
    made, overlapping the rest of the backward); host values a device op
    reads come back with `step.reload` (params at the start of the step,
    in order of first use; others right after they are made). Results
    are bit-identical. The function gets a `step.offload_optimizer`
    dictionary of the bytes moved and kept on the host.

    ```mlir
    %g_h = step.offload %g : tensor<768x768xf32>
    %p2, %m2, %v2 = step.adamw_update %p, %g_h, %m, %v, %t, %lr {step.host} ...
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the training step to rewrite">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def Remat : Pass<"step-remat", "::mlir::ModuleOp"> {
  let summary = "Recomputes forward values in the backward to fit a budget";
  let description = [{
    On a one-block training step (`@train_step` after canonicalize and CSE,
    before step-fuse), chooses which forward values the backward keeps and
    which it recomputes: the recomputed ones get a clone of their defining
    ops (marked `step.recomputed`) placed just before their first backward
    use, so the forward value dies at its last forward use.

    Modes: `none` applies only checkpoint scopes of the tracing API (ops
    carrying `step.checkpoint`); `auto` also recomputes elementwise and view
    ops where a min-cut says it saves bytes (no matmul is recomputed);
    `max` recomputes whole segments (the forward between two single-value
    cuts) to minimize the planned peak; `budget` recomputes the fewest
    segments whose plan fits `budget` bytes of arena. Every choice is
    checked against the real memory plan (after step-fuse when `fuse`).
    The function gets a `step.remat` dictionary of what was done.

    ```mlir
    %h2 = step.tanh %h {step.recomputed} : tensor<4x8xf32>
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none | auto | max | budget">,
    Option<"budget", "budget", "int64_t", "0",
           "arena bytes the plan must fit (mode budget)">,
    Option<"funcName", "func", "std::string", "\"train_step\"",
           "the training step to rewrite">,
    Option<"fuse", "fuse", "bool", "true",
           "measure each candidate's plan after step-fuse (as the pipeline "
           "will run it)">,
    Option<"geluEpilogues", "gelu-epilogues", "bool", "false",
           "the step-fuse option of the same name, for that measurement">,
    Option<"bgradEpilogues", "bgrad-epilogues", "bool", "false",
           "run step-fuse-bias-grad too, for that measurement">,
    Option<"alignment", "alignment", "int64_t", "256",
           "byte alignment of the memory plan measured">,
    Option<"exactLimit", "exact-limit", "int64_t", "6",
           "at most this many candidate segments: try every subset (exact); "
           "more: the greedy by bytes per FLOP">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// step-fuse
//===----------------------------------------------------------------------===//

def SplatBroadcast : Pass<"step-splat-broadcast", "::mlir::ModuleOp"> {
  let summary = "Splat constants become broadcasts of one element";
  let description = [{
    Rewrites every `step.constant` whose value is one number repeated over
    more than one element into `step.broadcast_in_dim` of a rank-0
    constant, so the value is never stored in full: not in the artifact's
    constants, not in device memory. The broadcast fuses into the kernels
    that read it (step-fuse) or, unfused, is a transient in the arena.
    Runs after the last canonicalization (which folds such broadcasts back).

    ```mlir
    %c = step.constant dense<5.000000e-01> : tensor<8x128x1024xf32>
    // becomes
    %s = step.constant dense<5.000000e-01> : tensor<f32>
    %c = step.broadcast_in_dim %s, dims = [] : tensor<f32> -> tensor<8x128x1024xf32>
    ```
  }];
}

def FuseAttention : Pass<"step-fuse-attention", "::mlir::ModuleOp"> {
  let summary = "Attention reads its heads in place: slices, transposes and "
                "reshapes around it join its kernel";
  let description = [{
    Outlines every attention op with the slice/transpose/reshape chains
    that produce its rows and the transposes that consume its results into
    a `step.fusion "attention"`, whose kernel addresses the rows through
    strided views (contract C6 of step.fusion) instead of the copies those
    ops make. Other users of a transposed result read it back through the
    inverse transposes (a gradient's saved output, which its own fusion
    then reads in place).

    ```mlir
    %s = step.slice %qkv ...
    %r = step.reshape %s : tensor<2x16x32xbf16> -> tensor<2x16x2x16xbf16>
    %q = step.transpose %r, perm = [0, 2, 1, 3] : ...
    %o = step.attention %q, %k, %v causal : ...
    %t = step.transpose %o, perm = [0, 2, 1, 3] : ...
    // becomes
    %t = step.fusion "attention"(%qkv) : ... {
      ... the slice, reshape, transposes and the attention ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def FuseBiasGrad : Pass<"step-fuse-bias-grad", "::mlir::ModuleOp"> {
  let summary = "A bias gradient no kernel makes on the way joins its weight gradient's matmul";
  let description = [{
    After step-fuse-attention, before step-fuse: a bare `reduce_sum` of a
    matmul's 2-d operand over the contraction dim (or of the tensor that
    operand reshapes, over its leading dims) into a vector of the matmul's
    element type, where the summed value is made by a matmul, an
    attention fusion or another op no generated kernel could sum on the
    way, joins the matmul as one `step.fusion "matmul"`, which the CUDA
    backend runs as one cuBLASLt call with the BGRADA (rhs) or BGRADB
    (lhs) epilogue: GPT-2's q/k/v bias gradient no longer reads the
    [B*T, 3C] gradient a second time (docs/fusion.md). The sum then reads
    the matmul's operand, over the same elements in the same order; when
    an op before the matmul reads the sum, the matmul moves up to it.
    Off by default (stepc --bgrad-epilogues) until run on a GPU.

    ```mlir
    %s = step.reduce_sum %g dims = [0, 1] : tensor<8x64x96xbf16> -> tensor<96xbf16>
    %g2 = step.reshape %g : tensor<8x64x96xbf16> -> tensor<512x96xbf16>
    %dw = step.matmul %x, %g2 transpose_a : tensor<512x32xbf16>, tensor<512x96xbf16> -> tensor<32x96xbf16>
    // becomes
    %g2 = step.reshape %g : tensor<8x64x96xbf16> -> tensor<512x96xbf16>
    %f:2 = step.fusion "matmul"(%x, %g2) { matmul, reduce_sum %g2 dims = [0] }
    ```
  }];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def Fuse : Pass<"step-fuse", "::mlir::ModuleOp"> {
  let summary = "Groups ops into step.fusion regions, one kernel each";
  let description = [{
    In every function, outlines groups of ops into `step.fusion` ops
    (docs/fusion.md): `reduction` fusions around reduction and row-op roots
    with their elementwise prologues and epilogues (sibling reductions of
    the same input shape share one), `loop` fusions of the remaining
    elementwise/broadcast/reshape ops, `matmul` fusions of a matmul with its
    bias add and activation, and `multi_tensor` fusions of the optimizer
    updates and of the full reductions of the gradient-norm clip. Results
    are unchanged: the body runs the same ops.

    ```mlir
    %r = step.fusion "loop" (%a, %b) : (...) -> tensor<4xf32> { ... }
    ```
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", "64",
           "most ops in one fusion (the register budget)">,
    Option<"maxInputs", "max-inputs", "int64_t", "24",
           "most distinct inputs of a loop or reduction fusion">,
    Option<"multiTensor", "multi-tensor", "bool", "true",
           "fuse optimizer updates and gradient-norm reductions across "
           "tensors">,
    Option<"maxTensors", "max-tensors", "int64_t", "48",
           "most tensors in one multi_tensor fusion (kernel parameter "
           "space)">,
    Option<"epilogues", "epilogues", "bool", "true",
           "fold bias add and ReLU/GELU into matmuls">,
    Option<"geluEpilogues", "gelu-epilogues", "bool", "false",
           "with epilogues: a tanh GELU whose input is also read later "
           "joins its matmul (cuBLASLt's GELU_AUX stores the input), and a "
           "gelu_grad of a matmul's product joins it with the bias "
           "gradient's reduce_sum (DGELU_BGRAD); off until run on a GPU">,
    Option<"rowOps", "row-ops", "bool", "true",
           "fuse prologues and epilogues into softmax, log_softmax, "
           "layer_norm and cross_entropy(_grad)">,
  ];
}

def FuseLoss : Pass<"step-fuse-loss", "::mlir::ModuleOp"> {
  let summary = "A cross-entropy loss and its gradient in one kernel";
  let description = [{
    Merges a `step.cross_entropy` and the `step.cross_entropy_grad` of the
    same logits and targets (bare or each in its `reduction` fusion, as
    step-fuse leaves them, the loss with any epilogue) into one
    `step.fusion "reduction"` with both ops' results, placed where the
    earlier of the two was: its kernel computes each row's max and sum of
    exp once and writes the gradient row and the loss (docs/fusion.md), so
    the logits, GPT-2's largest activation, are read by one kernel instead
    of two. Refused when the later op's operands do not exist at the
    earlier one, or when a gradient moved up to its loss would live over
    more than small values (the loss's bookkeeping) computed between.

    ```mlir
    %l = step.fusion "reduction"(%x, %y) { ... step.cross_entropy ... }
    %d = step.fusion "reduction"(%x, %y, %g) { ... step.cross_entropy_grad ... }
    // becomes
    %r:2 = step.fusion "reduction"(%x, %y, %g) { ... both ... }
    ```
  }];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def FuseRowChains : Pass<"step-fuse-row-chains", "::mlir::ModuleOp"> {
  let summary = "Row reductions that feed one another, and their loop, in one kernel";
  let description = [{
    Merges a row reduction (bare, or a `reduction` fusion with `reduce_*`
    roots over the trailing dims), the later row reductions of the same
    shape that read its result broadcast back over each row, and the
    `loop` fusion that consumes them, into one `step.fusion "row_chain"`
    at the last of them: one kernel takes each row through the reductions
    in turn and then stores it (docs/fusion.md, "row chains"). Layer
    norm's backward (mean, variance, the two means of its gradient, dx)
    becomes one pass over x and dy instead of four. Ops between that read
    the chain's results move after it; refused where that would keep more
    than small values alive longer, where a member would read such an op,
    or where rows are too long (65536 elements or more) or too few (under
    128, unless the tensor is small) for a kernel of a warp or block per
    row.

    ```mlir
    %m = step.reduce_mean %x dims = [1] : tensor<512x768xf32> -> tensor<512xf32>
    %r = step.fusion "reduction"(%m, %x) { ... broadcast %m, sub, mul, reduce_mean, rsqrt ... }
    %y = step.fusion "loop"(%x, %m, %r) { ... (x - m) * r ... }
    // becomes
    %c:3 = step.fusion "row_chain"(%x, ...) { ... all three bodies ... }
    ```
  }];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

def FuseLoopReductions : Pass<"step-fuse-loop-reductions", "::mlir::ModuleOp"> {
  let summary = "A loop fusion and the reductions of its results in one kernel";
  let description = [{
    Merges a `loop` fusion and the `reduce_*` reductions after it (bare, or
    `reduction` fusions without row ops; siblings: one operand shape and
    dims) that read its results element by element into one `step.fusion
    "reduction"` at the loop: the reduction kernel computes the loop's
    values where it reads each element, stores those that other ops read
    and reduces them (docs/fusion.md). A bias gradient (the column sum of
    the gradient a loop just wrote, GPT-2's GELU backward and packed q/k/v
    gradient) no longer reads that gradient back. Refused when a reduction
    reads a value made after the loop, or when reductions whose results
    come to more than 64 KiB would move up over ops other than views.

    ```mlir
    %g = step.fusion "loop"(%a, %b) { ... gelu backward ... }
    %s = step.reduce_sum %g dims = [0, 1] : tensor<8x1024x3072xbf16> -> tensor<3072xbf16>
    // becomes
    %r:2 = step.fusion "reduction"(%a, %b) { ... gelu backward, reduce_sum ... }
    ```
  }];
  let dependentDialects = ["::mlir::step::StepDialect",
                           "::mlir::func::FuncDialect"];
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

def TensorParallel : Pass<"step-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron-style tensor parallelism of the forward's matmul pairs";
  let description = [{
    Before step-autodiff: splits each pair `x @ W1 ... @ W2` of the forward
    (W1, W2 2-D params used once; between them elementwise ops, biases,
    head reshapes and transposes, attention, q/k/v slices) over a group of
    `size` ranks: W1 by columns, W2 by rows, the partial product
    all_reduce'd (sum) over the group. Split params get their local type
    and `step.tp_split = [dim, groups]`; the module a `step.tp` dictionary.
    step-shard (option `tp`) then makes the gradients right
    (docs/distributed.md).

    ```mlir
    %p = step.all_reduce %y {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>} : tensor<8x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let options = [
    Option<"funcName", "func", "std::string", "\"forward\"",
           "the forward function">,
    Option<"tpSize", "size", "int64_t", "1",
           "ranks of a tensor-parallel group">,
    Option<"worldSize", "world-size", "int64_t", "1",
           "all ranks (a multiple of size: world-size / size groups)">,
  ];
  let dependentDialects = ["::mlir::step::StepDialect"];
}

def Shard : Pass<"step-shard", "::mlir::ModuleOp"> {
  let summary = "Data parallelism and ZeRO-1/2/3: collectives and sharded optimizer state";
  let description = [{
    Makes @train_step (step-optimizer's form: a call of @forward_backward,
    then the update) the program each of `world-size` replicas runs on its
    slice of the global batch. `dp` all-reduces (mean) the loss and the
    gradients; `zero1` also shards the optimizer state (each replica updates
    its block of every param and all-gathers the result); `zero2` also
    reduce-scatters the gradients; `zero3` also shards the params, gathered
    before each use. With `overlap` the call is inlined and each gradient's
    collective issued right after the gradient is computed. Records a
    `step.shard` dictionary (per-replica bytes of params, gradients and
    state) and `step.full_shape` on sharded arguments and results
    (docs/distributed.md).

    ```mlir
    %g = step.reduce_scatter %flat {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 1>} : tensor<8xf32> -> tensor<4xf32>
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none | dp | zero1 | zero2 | zero3">,
    Option<"worldSize", "world-size", "int64_t", "1",
           "replicas (ranks) the step runs on">,
    Option<"overlap", "overlap", "bool", "true",
           "inline the backward and issue each gradient's collective as soon "
           "as the gradient exists">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
           "with overlap: merge the collectives of consecutive gradients "
           "into buckets of at least this many bytes (0: one per gradient)">,
    Option<"prefetch", "prefetch", "bool", "true",
           "with overlap, zero3: issue a layer's param gathers where the "
           "layer before it starts (one layer ahead)">,
    Option<"tp", "tp", "int64_t", "1",
           "mode dp after step-tensor-parallel of this size: replicated "
           "gradients averaged over the world, split ones over their "
           "data-parallel group and divided by tp">,
  ];
}

#endif // STEP_PASSES_TD
