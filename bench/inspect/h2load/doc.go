// Command h2load is bench/inspect's HTTP/2 load: the peer bench's load
// client speaks HTTP/1.1 only, so this one measures HTTP/2 inside an
// inspected tunnel against HTTP/1.1 through the same proxy, the same
// origin and the same client code.
//
//	h2load origin -addr 127.0.0.1:18445 -cert leaf.pem -key leaf-key.pem
//	h2load bench  -name N -proxy HOST:PORT -ca mint-ca.pem -proto h1|h2 [-pid PIDS] ... -out raw.jsonl
//	h2load report -in raw.jsonl [-md results.md]
//
// origin serves /small (2 bytes) and /bytes?n=N over TLS with ALPN h2 and
// http/1.1 (the peer bench's origin is HTTP/1.1 only, and egressd speaks
// to the client the protocol the origin chose). bench runs, against a
// proxy already started, with the client offering only -proto in ALPN
// (a tunnel that negotiates anything else is an error):
//
//	ka1  one tunnel; h2: -c concurrent streams on it, h1: one request at a time
//	ka   -c tunnels, one request at a time on each
//	nc   -c workers, each request a new TCP connection + CONNECT + full TLS
//	     handshake (+ the h2 preface and SETTINGS) + GET /small
//	thr  one tunnel downloads -thr-bytes from /bytes, -thr-runs times
//
// ka1, ka and nc stop after -dur or -max requests. Proxy CPU is the
// utime+stime of -pid from /proc, read around each test.
package main
