//===- StepDistOps.td - Collectives across replicas -----------*- tablegen -*-===//
//
// Ops of a step that runs as one of several replicas (ranks): the same
// program on every rank, each on its own data (SPMD, as XLA's and JAX's
// collectives). `step-shard` writes them; the runtime runs them with NCCL on
// GPUs and MPI on CPUs (docs/distributed.md).
//
// Every op names its replica groups: `group_size = G` and
// `replica_groups = [r0, r1, ...]`, all ranks listed once, G consecutive
// entries per group (`[0, 1, 2, 3]` with G = 2: groups {0, 1} and {2, 3}).
// A rank's index in its group is its position there. Every rank of a group
// must reach the same collectives in the same order.
//
//===----------------------------------------------------------------------===//

class Step_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Step_Op<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<InferTypeOpInterface>])> {
  let results = (outs Step_Tensor:$result);
  let assemblyFormat = "$operand attr-dict `:` type($operand) `->` type($result)";
}

def Step_AllReduceOp : Step_CollectiveOp<"all_reduce"> {
  let summary = "elementwise reduction over the replicas of a group";
  let description = [{
    Every replica of a group gets the elementwise `reduce` ("sum", "mean",
    "max" or "min") of the operands of all replicas of its group, the same
    bits on each (`torch.distributed.all_reduce`; mean is
    `ReduceOp.AVG`: the sum divided by G). f16/bf16 are reduced in f32 and
    rounded once. VJP (sum, mean): the same all_reduce of the cotangent
    (JAX's `psum` transpose); max and min have none.

    C1: `group_size >= 1` and `replica_groups` lists 0..N-1 once each,
        N a multiple of `group_size`.
    C2: `reduce` is sum, mean, max or min; mean needs a float type, sum a
        type other than i1.
    C3: the result type equals the operand type.

    ```mlir
    %g = step.all_reduce %x {group_size = 2 : i64, reduce = "mean", replica_groups = array<i64: 0, 1>} : tensor<8x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, StrAttr:$reduce,
                       I64Attr:$group_size, DenseI64ArrayAttr:$replica_groups);
}

def Step_ReduceScatterOp : Step_CollectiveOp<"reduce_scatter"> {
  let summary = "reduction over a group, each replica keeping one block";
  let description = [{
    The elementwise `reduce` ("sum" or "mean") over the replicas of a group,
    split along dim 0 into G equal blocks: the replica at index i of its
    group gets block i (`torch.distributed.reduce_scatter_tensor`).
    f16/bf16 are reduced in f32. VJP: all_gather of the cotangent (divided
    by G for mean).

    C1: as all_reduce.
    C2: `reduce` is sum or mean; mean needs a float type, sum a type other
        than i1.
    C3: the operand has rank >= 1 and a static dim 0 divisible by G; the
        result is the operand type with dim 0 divided by G.

    ```mlir
    %s = step.reduce_scatter %x {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>} : tensor<8x4xf32> -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, StrAttr:$reduce,
                       I64Attr:$group_size, DenseI64ArrayAttr:$replica_groups);
}

def Step_AllGatherOp : Step_CollectiveOp<"all_gather"> {
  let summary = "concatenation of the replicas' operands along dim 0";
  let description = [{
    Every replica of a group gets the operands of all replicas of its group
    concatenated along dim 0 in group order
    (`torch.distributed.all_gather_into_tensor`). VJP: reduce_scatter (sum)
    of the cotangent.

    C1: as all_reduce.
    C3: the operand has rank >= 1 and a static dim 0; the result is the
        operand type with dim 0 multiplied by G.

    ```mlir
    %p = step.all_gather %s {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<4x4xf32> -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, I64Attr:$group_size,
                       DenseI64ArrayAttr:$replica_groups);
}

def Step_LocalShardOp : Step_CollectiveOp<"local_shard", [Pure]> {
  let summary = "this replica's block of a replicated tensor, flattened";
  let description = [{
    The operand (the same on every replica of the group) flattened and
    zero-padded to G * S elements, S = ceil(numel / G); the replica at index
    i of its group gets elements [i * S, (i + 1) * S). Moves no data between
    replicas: it is how ZeRO's optimizer update reads its part of a
    replicated param or gradient. `all_gather` of the blocks, sliced to
    numel and reshaped, gives the operand back. Not differentiable: step-shard
    writes it after autodiff.

    C1: as all_reduce.
    C3: the operand has a static shape; the result is `tensor<S x T>` of
        the operand's element type T.

    ```mlir
    %b = step.local_shard %w {group_size = 4 : i64, replica_groups = array<i64: 0, 1, 2, 3>} : tensor<3x5xf32> -> tensor<4xf32>
    ```
  }];
  let arguments = (ins Step_Tensor:$operand, I64Attr:$group_size,
                       DenseI64ArrayAttr:$replica_groups);
}
