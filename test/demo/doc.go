// Package demo runs the README's first command's script
// (examples/demo/demo.sh, what `make demo` runs) with a freshly built
// egressd and checks the lines a newcomer is told to look for: the blind
// download through the redirect and its denials, and the inspected part
// (the 302 recorded with its redirect target, the blob's 200, a denied
// path answered 403 path-not-allowed inside the tunnel, and `egressd
// suggest` naming the blob host from the recorded redirect).
package demo
