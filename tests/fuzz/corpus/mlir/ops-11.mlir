func.func @attention_shapes(%q: tensor<16x8xf16>, %k: tensor<12x8xf16>, %v: tensor<12x4xf16>,
                            %qb: tensor<?x3x8xbf16>, %kb: tensor<?x?x8xbf16>, %vb: tensor<?x5x?xbf16>)
    -> (tensor<16x4xf16>, tensor<?x3x?xbf16>) {
  %0 = step.attention %q, %k, %v causal : tensor<16x8xf16>, tensor<12x8xf16>, tensor<12x4xf16> -> tensor<16x4xf16>
  %1 = step.attention %qb, %kb, %vb : tensor<?x3x8xbf16>, tensor<?x?x8xbf16>, tensor<?x5x?xbf16> -> tensor<?x3x?xbf16>
  return %0, %1 : tensor<16x4xf16>, tensor<?x3x?xbf16>
}

func.func @dynamic_joins(%a: tensor<?x3x8xf32>, %b: tensor<2x8x4xf32>, %l: tensor<?x10xf32>, %t: tensor<4xi64>, %x: tensor<4x?xf32>, %w: tensor<8xf32>) -> (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4x8xf32>) {
  %m = step.matmul %a, %b : tensor<?x3x8xf32>, tensor<2x8x4xf32> -> tensor<2x3x4xf32>
  %c = step.cross_entropy %l, %t reduction = none : tensor<?x10xf32>, tensor<4xi64> -> tensor<4xf32>
  %n = step.layer_norm %x, %w, %w eps = 1.0e-05 : tensor<4x?xf32>, tensor<8xf32>, tensor<8xf32>
  %s = step.reshape %n : tensor<4x8xf32> -> tensor<4x8xf32>
  return %m, %c, %s : tensor<2x3x4xf32>, tensor<4xf32>, tensor<4x8xf32>
}


func.func @stop_gradient(%f32: tensor<4x?xf32>, %bf16: tensor<bf16>, %i64: tensor<0x3xi64>, %i1: tensor<2xi1>)
    -> (tensor<4x?xf32>, tensor<bf16>, tensor<0x3xi64>, tensor<2xi1>, tensor<4x?xf32>) {
  %0 = step.stop_gradient %f32 : tensor<4x?xf32>
  %1 = step.stop_gradient %bf16 : tensor<bf16>
  %2 = step.stop_gradient %i64 : tensor<0x3xi64>
  %3 = step.stop_gradient %i1 : tensor<2xi1>
  %4 = "step.stop_gradient"(%0) : (tensor<4x?xf32>) -> tensor<4x?xf32>
  return %0, %1, %2, %3, %4 : tensor<4x?xf32>, tensor<bf16>, tensor<0x3xi64>, tensor<2xi1>, tensor<4x?xf32>
}


func.func @embedding_grad(%tok: tensor<4x16xi32>, %g: tensor<4x16x768xf32>, %i: tensor<i64>, %gb: tensor<8xbf16>,
                          %id: tensor<?x3xi64>, %gd: tensor<?x3x?xf16>)
    -> (tensor<50257x768xf32>, tensor<10x8xbf16>, tensor<7x?xf16>, tensor<5x768xf32>) {
  %0 = step.embedding_grad %tok, %g num_embeddings = 50257 : tensor<4x16xi32>, tensor<4x16x768xf32> -> tensor<50257x768xf32>
  %1 = step.embedding_grad %i, %gb num_embeddings = 10 : tensor<i64>, tensor<8xbf16> -> tensor<10x8xbf16>
  %2 = step.embedding_grad %id, %gd num_embeddings = 7 : tensor<?x3xi64>, tensor<?x3x?xf16> -> tensor<7x?xf16>
  %3 = "step.embedding_grad"(%tok, %g) <{num_embeddings = 5 : i64}> : (tensor<4x16xi32>, tensor<4x16x768xf32>) -> tensor<5x768xf32>
  return %0, %1, %2, %3 : tensor<50257x768xf32>, tensor<10x8xbf16>, tensor<7x?xf16>, tensor<5x768xf32>
}


