func.func @adam_like_update(%p: tensor<8xf32>, %g: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %t: tensor<i64>, %lr: tensor<f32>, %h: tensor<?x4xf16>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x4xf16>, tensor<8xf32>, tensor<8xf32>) {
  %a:3 = step.adamw_update %p, %g, %m, %v, %t, %lr : tensor<8xf32>, tensor<i64>, tensor<f32>
  %b:3 = step.adamw_update %h, %h, %h, %h, %t, %lr {beta1 = 0.8 : f64, beta2 = 0.75 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64} : tensor<?x4xf16>, tensor<i64>, tensor<f32>
  %c:3 = step.lamb_update %p, %g, %m, %v, %t, %lr {eps = 1.0e-6 : f64} : tensor<8xf32>, tensor<i64>, tensor<f32>
  %d:3 = "step.lamb_update"(%p, %g, %m, %v, %t, %lr) <{weight_decay = 0.0 : f64}> : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %e:3 = "step.adamw_update"(%p, %g, %m, %v, %t, %lr) <{beta2 = 0.5 : f64}> : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<i64>, tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %a#0, %a#1, %a#2, %b#0, %c#0, %d#0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<?x4xf16>, tensor<8xf32>, tensor<8xf32>
}


func.func @offload_reload(%x: tensor<4x8xbf16>, %i: tensor<3xi64>) -> (tensor<4x8xbf16>, tensor<3xi64>, tensor<3xi64>) {
  %h = step.offload %x : tensor<4x8xbf16>
  %x2 = step.reload %h : tensor<4x8xbf16>
  %g = "step.offload"(%i) : (tensor<3xi64>) -> tensor<3xi64>
  %i1 = "step.reload"(%g) : (tensor<3xi64>) -> tensor<3xi64>
  %i2 = step.reload %g : tensor<3xi64>
  return %x2, %i1, %i2 : tensor<4x8xbf16>, tensor<3xi64>, tensor<3xi64>
}

func.func @collectives(%x: tensor<4x3xbf16>, %n: tensor<2xi64>, %w: tensor<5x3xf32>)
    -> (tensor<4x3xbf16>, tensor<2xi64>, tensor<2x3xbf16>, tensor<4xi64>, tensor<8xf32>, tensor<4x3xbf16>) {
  %a = step.all_reduce %x {group_size = 4 : i64, reduce = "mean", replica_groups = array<i64: 0, 1, 2, 3>} : tensor<4x3xbf16> -> tensor<4x3xbf16>
  %m = "step.all_reduce"(%n) {group_size = 2 : i64, reduce = "max", replica_groups = array<i64: 0, 2, 1, 3>} : (tensor<2xi64>) -> tensor<2xi64>
  %s = step.reduce_scatter %x {group_size = 2 : i64, reduce = "sum", replica_groups = array<i64: 0, 1>} : tensor<4x3xbf16> -> tensor<2x3xbf16>
  %g = "step.all_gather"(%n) {group_size = 2 : i64, replica_groups = array<i64: 1, 0>} : (tensor<2xi64>) -> tensor<4xi64>
  %b = step.local_shard %w {group_size = 2 : i64, replica_groups = array<i64: 0, 1>} : tensor<5x3xf32> -> tensor<8xf32>
  %one = step.all_gather %x {group_size = 1 : i64, replica_groups = array<i64: 0>} : tensor<4x3xbf16> -> tensor<4x3xbf16>
  return %a, %m, %s, %g, %b, %one : tensor<4x3xbf16>, tensor<2xi64>, tensor<2x3xbf16>, tensor<4xi64>, tensor<8xf32>, tensor<4x3xbf16>
}
