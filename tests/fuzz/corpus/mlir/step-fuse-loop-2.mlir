func.func @cost_rule(%x: tensor<4x8xf32>, %a: tensor<8xf32>, %c: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = step.exp %a : tensor<8xf32>
  %n = step.neg %c : tensor<8xf32>
  %eb = step.broadcast_in_dim %e, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %nb = step.broadcast_in_dim %n, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %s = step.mul %x, %eb : tensor<4x8xf32>
  %t = step.add %s, %nb : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}
