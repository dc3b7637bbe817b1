package main

import (
	"crypto/tls"
	"sync"
)

// certCache is goproxy's CertStorage: one leaf per host, minted once even
// when first uses are concurrent (egressd's leaf cache and squid's
// dynamic_cert_mem_cache do the same; goproxy without a store signs a leaf
// per CONNECT). Unbounded: the bench has one host.
type certCache struct {
	mu    sync.Mutex
	leafs map[string]*leafEntry
}

type leafEntry struct {
	once sync.Once
	cert *tls.Certificate
	err  error
}

func newCertCache() *certCache { return &certCache{leafs: map[string]*leafEntry{}} }

// Fetch implements goproxy.CertStorage.
func (c *certCache) Fetch(host string, gen func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	c.mu.Lock()
	e := c.leafs[host]
	if e == nil {
		e = &leafEntry{}
		c.leafs[host] = e
	}
	c.mu.Unlock()
	e.once.Do(func() { e.cert, e.err = gen() })
	if e.err != nil {
		c.mu.Lock()
		if c.leafs[host] == e {
			delete(c.leafs, host)
		}
		c.mu.Unlock()
	}
	return e.cert, e.err
}
