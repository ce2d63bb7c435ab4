func.func @local_shard_c3(%x: tensor<?xf32>) -> tensor<2xf32> {
  %y = step.local_shard %x {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<?xf32> -> tensor<2xf32>
  return %y : tensor<2xf32>
}
