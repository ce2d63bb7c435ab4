//===- StepStructureOps.td - step.fusion and step.yield ------*- tablegen -*-===//
//
// Structure ops: a fused group of ops (formed by step-fuse) that codegen
// turns into one kernel.
//
//===----------------------------------------------------------------------===//

def Step_FusionOp : Step_Op<"fusion",
    [IsolatedFromAbove, RecursiveMemoryEffects, SingleBlock]> {
  let summary = "a group of ops that runs as one kernel";
  let description = [{
    Holds ops that `step-fuse` grouped; its value is that of its body run on
    `inputs`: block argument `i` is `inputs[i]`, and the operands of the
    `step.yield` terminator are the results. Codegen emits one kernel per
    fusion; the CPU backend and the interpreter run the body op by op, so a
    fusion never changes a result.

    `kind` says how the group is executed (docs/fusion.md):
     - `"loop"`: elementwise ops, `broadcast_in_dim`, `reshape`, `iota`
       and `pad`; every result has the same number of elements (the
       loop's domain);
     - `"reduction"`: one or more roots that read the same input shape
       (`reduce_sum`/`reduce_mean`/`reduce_max` over the same dims, or one
       of `softmax`, `log_softmax`, `layer_norm`, `cross_entropy`,
       `cross_entropy_grad`), elementwise prologues computing their inputs
       and elementwise epilogues of their results;
     - `"multi_tensor"`: independent optimizer updates (`sgd_update`,
       `adamw_update`, `lamb_update` of one kind and attributes) with
       elementwise prologues of their operands, or full reductions of
       several tensors combined by a scalar epilogue, run by one
       multi-tensor kernel;
     - `"matmul"`: one `matmul` with a bias add (`add` of a
       `broadcast_in_dim` over the last dim) and/or a `relu`/`gelu` (the
       `gelu`'s input may be a result too), or one `matmul` with a
       `gelu_grad` of its product (and the sum of that over the leading
       dims), run as one cuBLASLt call with an epilogue;
     - `"attention"`: one `attention`, `attention_lse` or `attention_grad`
       that reads its query, key, value (grad, saved out) rows through
       `slice`, `transpose` and `reshape` ops of the inputs, and writes its
       results through `transpose` and `reshape` ops into the results: one
       attention kernel addressing strided views, no copies
       (`step-fuse-attention`);
     - `"row_chain"`: `reduce_sum`/`reduce_mean`/`reduce_max` over the
       trailing dims of one shape D, where a later reduction may read an
       earlier one's result broadcast back over its row, with elementwise
       ops and views around them; one kernel takes each row through all
       the reductions in turn and stores the per-element and per-row
       results (`step-fuse-row-chains`: layer norm's backward).

    C1: `kind` is `loop`, `reduction`, `multi_tensor`, `matmul`,
        `attention` or `row_chain`.
    C2: the block takes one argument per input, of the input's type.
    C3: the body ends in `step.yield` whose operand types are the result
        types.
    C4: the body holds step ops only, no `step.fusion` or `step.constant`.
    C5: a `loop` body holds only elementwise ops, `broadcast_in_dim`,
        `reshape`, `iota` and `pad`, and every result has as many elements
        as the first.
    C6: an `attention` body holds one attention op and otherwise `slice`,
        `transpose`, `reshape` and `concat` ops; every row tensor operand of the
        attention is an input re-indexed by those ops so that its innermost
        stride is 1 (a reshape that merges dims not adjacent in memory is
        not a view); its valid length and saved log-sum-exp are inputs as
        they are; each result reaches its own fusion result through a
        chain of single-use `transpose`s and `reshape`s, innermost stride 1
        (`attention_lse`'s log-sum-exp is yielded as it is), or reaches so
        one input of a yielded `concat` whose every input is such a result
        (results packed side by side, each written into its window).
    C7: a `row_chain` body holds elementwise ops, `broadcast_in_dim`,
        `reshape`, `iota` and at least one `reduce_*`; every reduction
        reads one shape D over its trailing dims (the same count), never a
        per-row value; a per-row value (a reduction's result and what is
        computed from it without a broadcast) reaches a per-element op
        only through a `broadcast_in_dim` to D that maps its dims onto D's
        leading dims in order; no op mixes a per-row and a per-element
        operand; every result has one element per row of D or one per
        element of D (dialects/step/Fusion.h, RowChain).

    ```mlir
    %r = step.fusion "loop" (%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
    ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
      %s = step.add %x, %y : tensor<4xf32>
      %t = step.relu %s : tensor<4xf32>
      step.yield %t : tensor<4xf32>
    }
    ```
  }];
  let arguments = (ins StrAttr:$kind, Variadic<Step_Tensor>:$inputs);
  let results = (outs Variadic<Step_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$kind `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Block &getBlock() { return getBody().front(); }
    /// The terminator of the body.
    ::mlir::Operation *getYield() { return getBlock().getTerminator(); }
    /// C6 (kind "attention").
    ::mlir::LogicalResult verifyAttentionBody();
  }];
}

def Step_YieldOp : Step_Op<"yield",
    [Pure, ReturnLike, Terminator, HasParent<"FusionOp">]> {
  let summary = "the results of a step.fusion";
  let description = [{
    Ends the body of a `step.fusion`; its operands are the fusion's results.

    ```mlir
    step.yield %t, %u : tensor<4xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Variadic<Step_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}
