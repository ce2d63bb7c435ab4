// RUN: step-opt %s -split-input-file --step-fuse-row-chains | FileCheck %s
// RUN: step-opt %s -split-input-file --step-fuse --step-fuse-row-chains | FileCheck %s --check-prefix=PIPE

// Layer norm's backward as step-autodiff writes it under bf16 AMP, with
// the bias and weight gradients (column sums: not row reductions) between
// the statistics and dx. step-fuse leaves a bare reduce_mean (mean), a
// reduction fusion (rstd), the two column sums, a two-root reduction
// fusion (the two means of the gradient) and the dx loop; the chain is
// one row_chain fusion at the loop, and the column sums' fusion, which
// reads its mean and rstd, joins it (absorbColumns): one fusion, its
// mean and rstd no longer yielded, the sums of dy and dy * xhat its last
// results.
// PIPE-LABEL: func.func @ln_grad
// PIPE-SAME: (%[[X:[^:]+]]: tensor<64x32xf32>, %[[DY:[^:]+]]: tensor<64x32xbf16>, %[[W:[^:]+]]: tensor<32xf32>, %[[E:[^:]+]]: tensor<f32>)
// PIPE-NEXT: %[[C:.+]]:4 = step.fusion "row_chain"(%[[X]], %[[E]], %[[DY]], %[[W]]) : (tensor<64x32xf32>, tensor<f32>, tensor<64x32xbf16>, tensor<32xf32>) -> (tensor<64x32xf32>, tensor<64x32xbf16>, tensor<32xf32>, tensor<32xf32>)
// PIPE: step.reduce_mean %{{.+}} dims = [1] : tensor<64x32xf32> -> tensor<64xf32>
// PIPE: step.rsqrt
// PIPE: %[[G:.+]] = step.cast %{{.+}} : tensor<64x32xbf16> -> tensor<64x32xf32>
// PIPE: %[[XH:.+]] = step.mul %{{.+}}, %{{.+}} : tensor<64x32xf32>
// PIPE: step.reduce_mean %{{.+}} dims = [1]
// PIPE: step.reduce_mean %{{.+}} dims = [1]
// PIPE: %[[DXB:.+]] = step.cast %[[DX:[^ ]+]] : tensor<64x32xf32> -> tensor<64x32xbf16>
// PIPE-NEXT: %[[DB:.+]] = step.reduce_sum %[[G]] dims = [0] : tensor<64x32xf32> -> tensor<32xf32>
// PIPE-NEXT: %[[GX:.+]] = step.mul %[[G]], %[[XH]]
// PIPE-NEXT: %[[DW:.+]] = step.reduce_sum %[[GX]] dims = [0] : tensor<64x32xf32> -> tensor<32xf32>
// PIPE-NEXT: step.yield %[[DX]], %[[DXB]], %[[DB]], %[[DW]]
// PIPE-NEXT: }
// PIPE-NEXT: return %[[C]]#0, %[[C]]#1, %[[C]]#2, %[[C]]#3
func.func @ln_grad(%x: tensor<64x32xf32>, %dy: tensor<64x32xbf16>, %w: tensor<32xf32>, %eps: tensor<f32>) -> (tensor<64x32xf32>, tensor<64x32xbf16>, tensor<32xf32>, tensor<32xf32>) {
  %mean = step.reduce_mean %x dims = [1] : tensor<64x32xf32> -> tensor<64xf32>
  %mb = step.broadcast_in_dim %mean, dims = [0] : tensor<64xf32> -> tensor<64x32xf32>
  %xc = step.sub %x, %mb : tensor<64x32xf32>
  %sq = step.mul %xc, %xc : tensor<64x32xf32>
  %var = step.reduce_mean %sq dims = [1] : tensor<64x32xf32> -> tensor<64xf32>
  %eb = step.broadcast_in_dim %eps, dims = [] : tensor<f32> -> tensor<64xf32>
  %ve = step.add %var, %eb : tensor<64xf32>
  %rstd = step.rsqrt %ve : tensor<64xf32>
  %rb = step.broadcast_in_dim %rstd, dims = [0] : tensor<64xf32> -> tensor<64x32xf32>
  %xh = step.mul %xc, %rb : tensor<64x32xf32>
  %g = step.cast %dy : tensor<64x32xbf16> -> tensor<64x32xf32>
  %db = step.reduce_sum %g dims = [0] : tensor<64x32xf32> -> tensor<32xf32>
  %gx = step.mul %g, %xh : tensor<64x32xf32>
  %dw = step.reduce_sum %gx dims = [0] : tensor<64x32xf32> -> tensor<32xf32>
  %wb = step.broadcast_in_dim %w, dims = [1] : tensor<32xf32> -> tensor<64x32xf32>
  %d = step.mul %g, %wb : tensor<64x32xf32>
  %a = step.reduce_mean %d dims = [1] : tensor<64x32xf32> -> tensor<64xf32>
  %p = step.mul %d, %xh : tensor<64x32xf32>
  %b = step.reduce_mean %p dims = [1] : tensor<64x32xf32> -> tensor<64xf32>
  %ab = step.broadcast_in_dim %a, dims = [0] : tensor<64xf32> -> tensor<64x32xf32>
  %bb = step.broadcast_in_dim %b, dims = [0] : tensor<64xf32> -> tensor<64x32xf32>
  %t = step.mul %xh, %bb : tensor<64x32xf32>
  %u = step.sub %d, %ab : tensor<64x32xf32>
  %v = step.sub %u, %t : tensor<64x32xf32>
  %dx = step.mul %rb, %v : tensor<64x32xf32>
  %dxb = step.cast %dx : tensor<64x32xf32> -> tensor<64x32xbf16>
  return %dx, %dxb, %db, %dw : tensor<64x32xf32>, tensor<64x32xbf16>, tensor<32xf32>, tensor<32xf32>
}

// -----

// Softmax written out, as fusions (the pass alone): the max, a reduction
// fusion summing exp(x - max), the loop dividing. One row_chain, its body
// the three in turn, with the common exp(x - max) computed once by CSE;
// the max is not yielded (nothing outside reads it).
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:[^:]+]]: tensor<256x40xf32>)
// CHECK-NEXT: %[[C:.+]] = step.fusion "row_chain"(%[[X]]) : (tensor<256x40xf32>) -> tensor<256x40xf32>
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: tensor<256x40xf32>):
// CHECK-NEXT: %[[M:.+]] = step.reduce_max %[[A]] dims = [1]
// CHECK-NEXT: %[[MB:.+]] = step.broadcast_in_dim %[[M]], dims = [0]
// CHECK-NEXT: %[[S:.+]] = step.sub %[[A]], %[[MB]]
// CHECK-NEXT: %[[E:.+]] = step.exp %[[S]]
// CHECK-NEXT: %[[Z:.+]] = step.reduce_sum %[[E]] dims = [1]
// CHECK-NEXT: %[[ZB:.+]] = step.broadcast_in_dim %[[Z]], dims = [0]
// CHECK-NEXT: %[[Y:.+]] = step.div %[[E]], %[[ZB]]
// CHECK-NEXT: step.yield %[[Y]] : tensor<256x40xf32>
// CHECK: return %[[C]]
func.func @softmax(%x: tensor<256x40xf32>) -> tensor<256x40xf32> {
  %m = step.reduce_max %x dims = [1] : tensor<256x40xf32> -> tensor<256xf32>
  %z = step.fusion "reduction"(%m, %x) : (tensor<256xf32>, tensor<256x40xf32>) -> tensor<256xf32> {
  ^bb0(%a: tensor<256xf32>, %b: tensor<256x40xf32>):
    %0 = step.broadcast_in_dim %a, dims = [0] : tensor<256xf32> -> tensor<256x40xf32>
    %1 = step.sub %b, %0 : tensor<256x40xf32>
    %2 = step.exp %1 : tensor<256x40xf32>
    %3 = step.reduce_sum %2 dims = [1] : tensor<256x40xf32> -> tensor<256xf32>
    step.yield %3 : tensor<256xf32>
  }
  %y = step.fusion "loop"(%x, %m, %z) : (tensor<256x40xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<256x40xf32> {
  ^bb0(%a: tensor<256x40xf32>, %b: tensor<256xf32>, %c: tensor<256xf32>):
    %0 = step.broadcast_in_dim %b, dims = [0] : tensor<256xf32> -> tensor<256x40xf32>
    %1 = step.sub %a, %0 : tensor<256x40xf32>
    %2 = step.exp %1 : tensor<256x40xf32>
    %3 = step.broadcast_in_dim %c, dims = [0] : tensor<256xf32> -> tensor<256x40xf32>
    %4 = step.div %2, %3 : tensor<256x40xf32>
    step.yield %4 : tensor<256x40xf32>
  }
  return %y : tensor<256x40xf32>
}

// -----

// Not row chains: a column reduction (dims [0]) and its broadcast back;
// a loop reading a row result broadcast along the columns (the square
// shape makes the types fit; C7 refuses the merged body).
// CHECK-LABEL: func.func @not_rows
// CHECK-NOT: row_chain
// CHECK: return
func.func @not_rows(%x: tensor<256x40xf32>, %s: tensor<64x64xf32>) -> (tensor<256x40xf32>, tensor<64x64xf32>) {
  %c = step.reduce_sum %x dims = [0] : tensor<256x40xf32> -> tensor<40xf32>
  %y = step.fusion "loop"(%x, %c) : (tensor<256x40xf32>, tensor<40xf32>) -> tensor<256x40xf32> {
  ^bb0(%a: tensor<256x40xf32>, %b: tensor<40xf32>):
    %0 = step.broadcast_in_dim %b, dims = [1] : tensor<40xf32> -> tensor<256x40xf32>
    %1 = step.sub %a, %0 : tensor<256x40xf32>
    step.yield %1 : tensor<256x40xf32>
  }
  %r = step.reduce_sum %s dims = [1] : tensor<64x64xf32> -> tensor<64xf32>
  %z = step.fusion "loop"(%s, %r) : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xf32> {
  ^bb0(%a: tensor<64x64xf32>, %b: tensor<64xf32>):
    %0 = step.broadcast_in_dim %b, dims = [1] : tensor<64xf32> -> tensor<64x64xf32>
    %1 = step.sub %a, %0 : tensor<64x64xf32>
    step.yield %1 : tensor<64x64xf32>
  }
  return %y, %z : tensor<256x40xf32>, tensor<64x64xf32>
}

// -----

// Rows too long for a warp or block each (70000 elements) and one row of
// a large tensor (a full sum feeding its own broadcast): left alone.
// CHECK-LABEL: func.func @not_row_kernels
// CHECK-NOT: row_chain
// CHECK: return
func.func @not_row_kernels(%x: tensor<200x70000xf32>, %y: tensor<2000x1000xf32>) -> (tensor<200x70000xf32>, tensor<2000x1000xf32>) {
  %m = step.reduce_max %x dims = [1] : tensor<200x70000xf32> -> tensor<200xf32>
  %a = step.fusion "loop"(%x, %m) : (tensor<200x70000xf32>, tensor<200xf32>) -> tensor<200x70000xf32> {
  ^bb0(%p: tensor<200x70000xf32>, %q: tensor<200xf32>):
    %0 = step.broadcast_in_dim %q, dims = [0] : tensor<200xf32> -> tensor<200x70000xf32>
    %1 = step.sub %p, %0 : tensor<200x70000xf32>
    step.yield %1 : tensor<200x70000xf32>
  }
  %s = step.reduce_sum %y dims = [0, 1] : tensor<2000x1000xf32> -> tensor<f32>
  %b = step.fusion "loop"(%y, %s) : (tensor<2000x1000xf32>, tensor<f32>) -> tensor<2000x1000xf32> {
  ^bb0(%p: tensor<2000x1000xf32>, %q: tensor<f32>):
    %0 = step.broadcast_in_dim %q, dims = [] : tensor<f32> -> tensor<2000x1000xf32>
    %1 = step.div %p, %0 : tensor<2000x1000xf32>
    step.yield %1 : tensor<2000x1000xf32>
  }
  return %a, %b : tensor<200x70000xf32>, tensor<2000x1000xf32>
}

// -----

// Between the mean and its loop, an op reads the mean and a 128 KiB value
// nothing reads after it: moving it after the fusion would keep that value
// alive longer, so the chain is refused. With a small value the same op
// moves after the fusion.
// CHECK-LABEL: func.func @extends
// CHECK-NOT: row_chain
// CHECK: return
func.func @extends(%x: tensor<256x64xf32>, %z0: tensor<256x128xf32>) -> (tensor<256x64xf32>, tensor<256x128xf32>) {
  %z = step.exp %z0 : tensor<256x128xf32>
  %m = step.reduce_mean %x dims = [1] : tensor<256x64xf32> -> tensor<256xf32>
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<256xf32> -> tensor<256x128xf32>
  %t = step.mul %mb, %z : tensor<256x128xf32>
  %y = step.fusion "loop"(%x, %m) : (tensor<256x64xf32>, tensor<256xf32>) -> tensor<256x64xf32> {
  ^bb0(%a: tensor<256x64xf32>, %b: tensor<256xf32>):
    %0 = step.broadcast_in_dim %b, dims = [0] : tensor<256xf32> -> tensor<256x64xf32>
    %1 = step.sub %a, %0 : tensor<256x64xf32>
    step.yield %1 : tensor<256x64xf32>
  }
  return %y, %t : tensor<256x64xf32>, tensor<256x128xf32>
}

// CHECK-LABEL: func.func @moves
// CHECK-SAME: (%[[X:[^:]+]]: tensor<256x64xf32>, %[[Z0:[^:]+]]: tensor<256x4xf32>)
// CHECK-NEXT: %[[Z:.+]] = step.exp %[[Z0]]
// CHECK-NEXT: %[[C:.+]]:2 = step.fusion "row_chain"(%[[X]]) : (tensor<256x64xf32>) -> (tensor<256xf32>, tensor<256x64xf32>)
// CHECK: step.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[MB:.+]] = step.broadcast_in_dim %[[C]]#0, dims = [0]
// CHECK-NEXT: %[[T:.+]] = step.mul %[[MB]], %[[Z]]
// CHECK-NEXT: return %[[C]]#1, %[[T]]
func.func @moves(%x: tensor<256x64xf32>, %z0: tensor<256x4xf32>) -> (tensor<256x64xf32>, tensor<256x4xf32>) {
  %z = step.exp %z0 : tensor<256x4xf32>
  %m = step.reduce_mean %x dims = [1] : tensor<256x64xf32> -> tensor<256xf32>
  %mb = step.broadcast_in_dim %m, dims = [0] : tensor<256xf32> -> tensor<256x4xf32>
  %t = step.mul %mb, %z : tensor<256x4xf32>
  %y = step.fusion "loop"(%x, %m) : (tensor<256x64xf32>, tensor<256xf32>) -> tensor<256x64xf32> {
  ^bb0(%a: tensor<256x64xf32>, %b: tensor<256xf32>):
    %0 = step.broadcast_in_dim %b, dims = [0] : tensor<256xf32> -> tensor<256x64xf32>
    %1 = step.sub %a, %0 : tensor<256x64xf32>
    step.yield %1 : tensor<256x64xf32>
  }
  return %y, %t : tensor<256x64xf32>, tensor<256x4xf32>
}

// -----

// Column units after a chain (absorbColumns), rows of 1024 elements: the
// sum of the chain's result y over the rows joins it (32 accumulators a
// lane); the sum of x does not (another 32: past the budget of 48); the
// sum of x3 (reads neither an input nor a result of the chain) does not;
// nor does the sum of y * w, w made after the chain.
// CHECK-LABEL: func.func @columns
// CHECK-SAME: (%[[X:[^:]+]]: tensor<256x1024xf32>, %[[X3:[^:]+]]: tensor<2x128x1024xf32>)
// CHECK-NEXT: %[[C:.+]]:2 = step.fusion "row_chain"(%[[X]]) : (tensor<256x1024xf32>) -> (tensor<256x1024xf32>, tensor<1024xf32>)
// CHECK: %[[Y:.+]] = step.div
// CHECK-NEXT: %[[SY:.+]] = step.reduce_sum %[[Y]] dims = [0] : tensor<256x1024xf32> -> tensor<1024xf32>
// CHECK-NEXT: step.yield %[[Y]], %[[SY]]
// CHECK: %[[SX:.+]] = step.reduce_sum %[[X]] dims = [0]
// CHECK-NEXT: %[[SB:.+]] = step.reduce_sum %[[X3]] dims = [0] : tensor<2x128x1024xf32> -> tensor<128x1024xf32>
// CHECK-NEXT: %[[W:.+]] = step.exp %[[X]]
// CHECK-NEXT: %[[YW:.+]] = step.fusion "reduction"(%[[C]]#0, %[[W]])
// CHECK: return %[[C]]#0, %[[C]]#1, %[[SX]], %[[SB]], %[[YW]]
func.func @columns(%x: tensor<256x1024xf32>, %x3: tensor<2x128x1024xf32>) -> (tensor<256x1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<128x1024xf32>, tensor<1024xf32>) {
  %m = step.reduce_max %x dims = [1] : tensor<256x1024xf32> -> tensor<256xf32>
  %y = step.fusion "loop"(%x, %m) : (tensor<256x1024xf32>, tensor<256xf32>) -> tensor<256x1024xf32> {
  ^bb0(%a: tensor<256x1024xf32>, %b: tensor<256xf32>):
    %0 = step.broadcast_in_dim %b, dims = [0] : tensor<256xf32> -> tensor<256x1024xf32>
    %1 = step.div %a, %0 : tensor<256x1024xf32>
    step.yield %1 : tensor<256x1024xf32>
  }
  %sy = step.reduce_sum %y dims = [0] : tensor<256x1024xf32> -> tensor<1024xf32>
  %sx = step.reduce_sum %x dims = [0] : tensor<256x1024xf32> -> tensor<1024xf32>
  %sb = step.reduce_sum %x3 dims = [0] : tensor<2x128x1024xf32> -> tensor<128x1024xf32>
  %w = step.exp %x : tensor<256x1024xf32>
  %yw = step.fusion "reduction"(%y, %w) : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<1024xf32> {
  ^bb0(%a: tensor<256x1024xf32>, %b: tensor<256x1024xf32>):
    %0 = step.mul %a, %b : tensor<256x1024xf32>
    %1 = step.reduce_sum %0 dims = [0] : tensor<256x1024xf32> -> tensor<1024xf32>
    step.yield %1 : tensor<1024xf32>
  }
  return %y, %sy, %sx, %sb, %yw : tensor<256x1024xf32>, tensor<1024xf32>, tensor<1024xf32>, tensor<128x1024xf32>, tensor<1024xf32>
}

// -----

// Column units before a chain: the sum of its input x over the rows,
// read only after the chain, joins it (made where the chain runs); the
// sum of x read before the chain (by %early) does not; the sum of x3 over
// the batch dim only (dims [0] of [2, 128, 64]: 2 of the 256 rows per
// element, no column reduction under C7) does not join the chain over x3.
// CHECK-LABEL: func.func @columns_before
// CHECK-SAME: (%[[X:[^:]+]]: tensor<256x64xf32>, %[[X3:[^:]+]]: tensor<2x128x64xf32>)
// CHECK-NEXT: %[[E:.+]] = step.reduce_sum %[[X]] dims = [0] : tensor<256x64xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[EARLY:.+]] = step.neg %[[E]]
// CHECK: %[[B3:.+]] = step.reduce_sum %[[X3]] dims = [0] : tensor<2x128x64xf32> -> tensor<128x64xf32>
// CHECK: %[[C:.+]]:2 = step.fusion "row_chain"(%[[X]]) : (tensor<256x64xf32>) -> (tensor<64xf32>, tensor<256x64xf32>)
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: tensor<256x64xf32>):
// CHECK-NEXT: %[[S:.+]] = step.reduce_sum %[[A]] dims = [0] : tensor<256x64xf32> -> tensor<64xf32>
// CHECK: step.yield %[[S]], %{{.+}} : tensor<64xf32>, tensor<256x64xf32>
// CHECK: %[[C3:.+]] = step.fusion "row_chain"(%[[X3]])
// CHECK-NOT: dims = [0]
// CHECK: return %[[EARLY]], %[[C]]#0, %[[C]]#1, %[[B3]], %[[C3]]
func.func @columns_before(%x: tensor<256x64xf32>, %x3: tensor<2x128x64xf32>) -> (tensor<64xf32>, tensor<64xf32>, tensor<256x64xf32>, tensor<128x64xf32>, tensor<2x128x64xf32>) {
  %e = step.reduce_sum %x dims = [0] : tensor<256x64xf32> -> tensor<64xf32>
  %early = step.neg %e : tensor<64xf32>
  %s = step.reduce_sum %x dims = [0] : tensor<256x64xf32> -> tensor<64xf32>
  %b3 = step.reduce_sum %x3 dims = [0] : tensor<2x128x64xf32> -> tensor<128x64xf32>
  %m = step.reduce_max %x dims = [1] : tensor<256x64xf32> -> tensor<256xf32>
  %y = step.fusion "loop"(%x, %m) : (tensor<256x64xf32>, tensor<256xf32>) -> tensor<256x64xf32> {
  ^bb0(%a: tensor<256x64xf32>, %b: tensor<256xf32>):
    %0 = step.broadcast_in_dim %b, dims = [0] : tensor<256xf32> -> tensor<256x64xf32>
    %1 = step.div %a, %0 : tensor<256x64xf32>
    step.yield %1 : tensor<256x64xf32>
  }
  %m3 = step.reduce_max %x3 dims = [2] : tensor<2x128x64xf32> -> tensor<2x128xf32>
  %y3 = step.fusion "loop"(%x3, %m3) : (tensor<2x128x64xf32>, tensor<2x128xf32>) -> tensor<2x128x64xf32> {
  ^bb0(%a: tensor<2x128x64xf32>, %b: tensor<2x128xf32>):
    %0 = step.broadcast_in_dim %b, dims = [0, 1] : tensor<2x128xf32> -> tensor<2x128x64xf32>
    %1 = step.div %a, %0 : tensor<2x128x64xf32>
    step.yield %1 : tensor<2x128x64xf32>
  }
  return %early, %s, %y, %b3, %y3 : tensor<64xf32>, tensor<64xf32>, tensor<256x64xf32>, tensor<128x64xf32>, tensor<2x128x64xf32>
}

// -----

// A loop making the chain's input (a residual add before a layer norm's
// mean) joins the chain, which computes the sum from the loop's inputs and
// yields it for the later readers; then, of the two column units that
// fit one at a time (32 accumulators a lane each, a budget of 48), the one
// before the chain that reads two of its new inputs (2 MiB of reads
// saved) joins rather than the nearer one after it that reads its result
// (1 MiB).
// CHECK-LABEL: func.func @producer
// CHECK-SAME: (%[[A:[^:]+]]: tensor<256x1024xf32>, %[[B:[^:]+]]: tensor<256x1024xf32>)
// CHECK-NEXT: %[[C:.+]]:3 = step.fusion "row_chain"(%[[A]], %[[B]])
// CHECK-NEXT: ^bb0(%[[P:[^:]+]]: tensor<256x1024xf32>, %[[Q:[^:]+]]: tensor<256x1024xf32>):
// CHECK-NEXT: %[[AB:.+]] = step.mul %[[P]], %[[Q]]
// CHECK-NEXT: %[[SAB:.+]] = step.reduce_sum %[[AB]] dims = [0]
// CHECK-NEXT: %[[R:.+]] = step.add %[[P]], %[[Q]]
// CHECK-NEXT: %[[M:.+]] = step.reduce_mean %[[R]] dims = [1]
// CHECK: %[[Y:.+]] = step.sub %[[R]], %{{.+}}
// CHECK-NEXT: step.yield %[[SAB]], %[[R]], %[[Y]]
// CHECK: %[[SY:.+]] = step.reduce_sum %[[C]]#2 dims = [0]
// CHECK-NEXT: return %[[C]]#1, %[[C]]#2, %[[C]]#0, %[[SY]]
func.func @producer(%a: tensor<256x1024xf32>, %b: tensor<256x1024xf32>) -> (tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<1024xf32>, tensor<1024xf32>) {
  %r = step.fusion "loop"(%a, %b) : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  ^bb0(%p: tensor<256x1024xf32>, %q: tensor<256x1024xf32>):
    %0 = step.add %p, %q : tensor<256x1024xf32>
    step.yield %0 : tensor<256x1024xf32>
  }
  %ab = step.fusion "reduction"(%a, %b) : (tensor<256x1024xf32>, tensor<256x1024xf32>) -> tensor<1024xf32> {
  ^bb0(%p: tensor<256x1024xf32>, %q: tensor<256x1024xf32>):
    %0 = step.mul %p, %q : tensor<256x1024xf32>
    %1 = step.reduce_sum %0 dims = [0] : tensor<256x1024xf32> -> tensor<1024xf32>
    step.yield %1 : tensor<1024xf32>
  }
  %m = step.reduce_mean %r dims = [1] : tensor<256x1024xf32> -> tensor<256xf32>
  %y = step.fusion "loop"(%r, %m) : (tensor<256x1024xf32>, tensor<256xf32>) -> tensor<256x1024xf32> {
  ^bb0(%p: tensor<256x1024xf32>, %q: tensor<256xf32>):
    %0 = step.broadcast_in_dim %q, dims = [0] : tensor<256xf32> -> tensor<256x1024xf32>
    %1 = step.sub %p, %0 : tensor<256x1024xf32>
    step.yield %1 : tensor<256x1024xf32>
  }
  %sy = step.reduce_sum %y dims = [0] : tensor<256x1024xf32> -> tensor<1024xf32>
  return %r, %y, %ab, %sy : tensor<256x1024xf32>, tensor<256x1024xf32>, tensor<1024xf32>, tensor<1024xf32>
}
