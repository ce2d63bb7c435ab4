module {
  func.func @other() {
    return
  }
}
