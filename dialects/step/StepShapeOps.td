//===- StepShapeOps.td - Shape, reduction and matmul ops ------*- tablegen -*-===//

//===----------------------------------------------------------------------===//
// step.constant
//===----------------------------------------------------------------------===//

def Step_ConstantOp : Step_Op<"constant",
    [Pure, ConstantLike, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor whose value is a dense elements attribute.

    C1: the value is a dense elements attribute of a static shape.

    ```mlir
    %c = step.constant dense<[1.0, 2.0]> : tensor<2xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.broadcast_in_dim
//===----------------------------------------------------------------------===//

def Step_BroadcastInDimOp : Step_Op<"broadcast_in_dim", [Pure]> {
  let summary = "explicit broadcast";
  let description = [{
    Operand dimension `k` becomes result dimension `dims[k]`; the other result
    dimensions are new. An operand dimension of size 1 is repeated (NumPy
    broadcasting is this op with `dims` aligned to the right).

    C1: `size(dims) == rank(operand)`.
    C2: `0 <= dims[k] < rank(result)` and `dims` is strictly increasing.
    C3: `dim(operand, k)` is 1 or equals `dim(result, dims[k])`.
    C4: a dynamic result dimension mapped from an operand dimension is
        mapped from a dynamic one. One no operand dimension maps to is
        sized by the value the result is combined with (a model with
        symbolic dims, before `step-pad-dynamic`; the interpreter cannot
        run it).
    C5: the element types are equal.

    ```mlir
    %r = step.broadcast_in_dim %b, dims = [1] : tensor<256xf32> -> tensor<32x256xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand,
                       DenseI64ArrayAttr:$broadcast_dimensions);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand `,` `dims` `=` $broadcast_dimensions "
                       "attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.reshape
//===----------------------------------------------------------------------===//

def Step_ReshapeOp : Step_Op<"reshape", [Pure]> {
  let summary = "same elements, new shape";
  let description = [{
    `torch.reshape` of a contiguous tensor (row-major order is kept).

    C1: the element types are equal.
    C2: static shapes have equal element counts (and counts fit in int64);
        with a dynamic operand and a static result, the result count is a
        multiple of the operand's static part.
    C3: the result has at most one dynamic dimension, and one only if the
        operand has one; its size is derived from the element count, so the
        result's static dims must hold at least one element.

    ```mlir
    %r = step.reshape %x : tensor<4x8xf32> -> tensor<32xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat =
      "$operand attr-dict `:` type($operand) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.transpose
//===----------------------------------------------------------------------===//

def Step_TransposeOp : Step_Op<"transpose",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "permute dimensions";
  let description = [{
    `torch.permute(x, perm)`: `dim(result, i) == dim(operand, perm[i])`.

    C1: `perm` is a permutation of `[0, rank(operand))`.

    ```mlir
    %t = step.transpose %x, perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, DenseI64ArrayAttr:$permutation);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand `,` `perm` `=` $permutation attr-dict `:` "
                       "type($operand) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.slice
//===----------------------------------------------------------------------===//

def Step_SliceOp : Step_Op<"slice",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "strided slice";
  let description = [{
    `x[start0:limit0:stride0, ...]`: result dimension `i` has
    `ceil((limit[i] - start[i]) / strides[i])` elements.

    C1: `start`, `limit` and `strides` each have `rank(operand)` entries.
    C2: `0 <= start[i] <= limit[i]`, and `limit[i] <= dim(operand, i)` when
        that dimension is static.
    C3: `strides[i] >= 1`.

    ```mlir
    %s = step.slice %x start = [0, 2] limit = [4, 8] strides = [1, 2]
           : tensor<4x8xf32> -> tensor<4x3xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$strides);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand `start` `=` $start `limit` `=` $limit "
      "`strides` `=` $strides attr-dict `:` type($operand) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.concat
//===----------------------------------------------------------------------===//

def Step_ConcatOp : Step_Op<"concat",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "concatenate along a dimension";
  let description = [{
    `torch.cat(inputs, dim)`.

    C1: there is at least one input.
    C2: every input has the same element type and rank.
    C3: `0 <= dim < rank`.
    C4: the inputs agree on every dimension other than `dim`.
    C5: the concatenated size fits in int64.

    ```mlir
    %c = step.concat %a, %b dim = 0 : tensor<2x3xf32>, tensor<4x3xf32> -> tensor<6x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Step_Tensor>:$inputs, I64Attr:$dimension);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$inputs `dim` `=` $dimension attr-dict `:` "
                       "type($inputs) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.pad
//===----------------------------------------------------------------------===//

def Step_PadOp : Step_Op<"pad",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "constant padding";
  let description = [{
    `torch.nn.functional.pad(x, ..., mode="constant", value=value)` with
    `low[i]` elements before and `high[i]` after dimension `i`.

    C1: `low` and `high` each have `rank(operand)` entries.
    C2: `low[i] >= 0` and `high[i] >= 0`, and padded sizes fit in int64.
    C3: for an integer element type, `value` is an integer it can hold (0 or
        1 for `i1`); for floats it is rounded to nearest (overflowing to inf).

    ```mlir
    %p = step.pad %x low = [0, 1] high = [2, 0] value = 0.0
           : tensor<2x3xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, F64Attr:$value);
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand `low` `=` $low `high` `=` $high `value` `=` "
      "$value attr-dict `:` type($operand) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// step.iota
//===----------------------------------------------------------------------===//

def Step_IotaOp : Step_Op<"iota", [Pure]> {
  let summary = "indices along a dimension";
  let description = [{
    `result[..., i, ...] = i` along `dim` (as `torch.arange` broadcast).

    C1: the result's rank is at least 1 and its shape is static, except
        for dims named by a `step.dims` attribute (`["T"]`, one string per
        dim): symbolic lengths that `step-pad-dynamic` makes static.
    C2: `0 <= dim < rank(result)`.
    C3: the element type is not `i1`.

    ```mlir
    %i = step.iota dim = 0 : tensor<8xi64>
    ```
  }];
  let arguments = (ins I64Attr:$dimension);
  let results = (outs Step_NumTensor:$result);
  let assemblyFormat = "`dim` `=` $dimension attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions: step.reduce_sum, step.reduce_max, step.reduce_mean
//===----------------------------------------------------------------------===//

class Step_ReduceOp<string mnemonic, Type T, string torchName,
                    bit needsElements = 0>
    : Step_Op<mnemonic, [Pure, InferTypeOpInterface]> {
  let summary = torchName # " over a list of dims";
  let description = "`" # torchName # "(x, dims, keepdim)`. Floats accumulate "
    # "in f32 or wider and round once. Empty `dims` is the identity.\n\n"
    # "C1: each entry of `dims` is in `[0, rank(operand))`.\n"
    # "C2: `dims` has no duplicates.\n"
    # !if(needsElements, "C3: no reduced dim has static size 0 (a maximum of "
    #                    "nothing is undefined, as in PyTorch).\n", "")
    # "\n"
    # "```mlir\n%s = step." # mnemonic # " %x dims = [1] keepdim "
    # ": tensor<4x8xf32> -> tensor<4x1xf32>\n```";
  let arguments = (ins T:$operand, DenseI64ArrayAttr:$dims, UnitAttr:$keepdim);
  let results = (outs T:$result);
  let assemblyFormat = "$operand `dims` `=` $dims (`keepdim` $keepdim^)? "
                       "attr-dict `:` type($operand) `->` type($result)";
  let extraClassDeclaration = [{
    static ::mlir::LogicalResult inferReturnTypes(
        ::mlir::MLIRContext *, std::optional<::mlir::Location> loc,
        ::mlir::ValueRange operands, ::mlir::DictionaryAttr attrs,
        ::mlir::OpaqueProperties props, ::mlir::RegionRange regions,
        ::llvm::SmallVectorImpl<::mlir::Type> &inferred) {
      Adaptor adaptor(operands, attrs, props, regions);
      return ::mlir::step::inferReduceType(loc, getOperationName(),
          adaptor.getOperand().getType(), adaptor.getDims(),
          adaptor.getKeepdim(), inferred, }] # !if(needsElements, "true",
          "false") # [{);
    }
  }];
}

def Step_ReduceSumOp : Step_ReduceOp<"reduce_sum", Step_NumTensor, "torch.sum"> {
  let hasFolder = 1;
}
def Step_ReduceMaxOp
    : Step_ReduceOp<"reduce_max", Step_NumTensor, "torch.amax", 1>;
def Step_ReduceMeanOp
    : Step_ReduceOp<"reduce_mean", Step_FloatTensor, "torch.mean">;

//===----------------------------------------------------------------------===//
// step.matmul
//===----------------------------------------------------------------------===//

def Step_MatmulOp : Step_Op<"matmul",
    [Pure, DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "batched matrix product";
  let description = [{
    `torch.matmul(op_a(lhs), op_b(rhs))` where `op_a` transposes the last two
    dims when `transpose_a` is set (likewise `transpose_b`). Leading (batch)
    dims are not broadcast, except that a rank-2 `rhs` is shared by every
    batch (a weight applied to a batch of activations). f16/bf16 accumulate
    in f32.

    C1: `rank(lhs) >= 2`.
    C2: `rank(rhs) == rank(lhs)` or `rank(rhs) == 2`.
    C3: the element types are equal.
    C4: the batch dims of `lhs` and `rhs` agree.
    C5: the contracting dims agree (`K` of `lhs` equals `K` of `rhs`).

    ```mlir
    %y = step.matmul %x, %w transpose_b : tensor<32x784xf32>, tensor<256x784xf32> -> tensor<32x256xf32>
    ```
  }];
  let arguments = (ins Step_FloatTensor:$lhs, Step_FloatTensor:$rhs,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs Step_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs (`transpose_a` $transpose_a^)? "
      "(`transpose_b` $transpose_b^)? attr-dict `:` type($lhs) `,` type($rhs) "
      "`->` type($result)";
}
