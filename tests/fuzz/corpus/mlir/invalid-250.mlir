func.func @all_reduce_c2(%x: tensor<4xi32>) -> tensor<4xi32> {
  %y = step.all_reduce %x {group_size = 1 : i64, reduce = "mean", replica_groups = array<i64: 0>} : tensor<4xi32> -> tensor<4xi32>
  return %y : tensor<4xi32>
}
