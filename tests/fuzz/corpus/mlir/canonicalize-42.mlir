func.func @broadcast_in_dim_identity(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %0 = step.broadcast_in_dim %x, dims = [0, 1] : tensor<?x3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
