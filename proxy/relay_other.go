//go:build !linux

package proxy

import (
	"net"
	"sync/atomic"
)

// relay moves src to dst until EOF or an error (portable path).
func (t *tunnel) relay(dst, src net.Conn, n *atomic.Int64) error {
	return t.relayCopy(dst, src, n)
}
