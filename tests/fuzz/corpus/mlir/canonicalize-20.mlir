func.func @cast_same_type(%x: tensor<?x4xbf16>) -> tensor<?x4xbf16> {
  %0 = step.cast %x : tensor<?x4xbf16> -> tensor<?x4xbf16>
  return %0 : tensor<?x4xbf16>
}
