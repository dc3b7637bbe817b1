package dnsserver

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/egressd/egressd/policy"
	"github.com/egressd/egressd/record"
	"github.com/egressd/egressd/resolver"
)

// query is one query in progress: what the handler learned so far, turned
// into the answer and the audit record at the end, and where it stands
// (stage).
type query struct {
	start  time.Time
	src    netip.Addr
	req    *dns.Msg
	udp    bool
	client *policy.Client
	q      dns.Question
	host   string // qname lower case, without the trailing dot
	rec    record.Record
	dec    policy.Decision
	ede    *dns.EDNS0_EDE
	res    *resolver.Result // the upstream answer, when one was asked
	sv     *served          // what the answer was made of (answerFromCache)
	err    error

	stage stage
	// detach, set by a UDP reader (udp.go), is called once before the
	// query may wait on the network (detachOnce): the reader hands its
	// socket on. A reader's query is answered before it is recorded
	// (stage answered, then recordNow): no client of a reader waits for
	// a record, its own or one of its batch.
	detach func()
	resp   *dns.Msg // the answer whose record waits (stage answered)

	// Room for the answer and its audit record, so that a UDP reader,
	// which reuses its query, allocates none of it (the answer is packed
	// before the next query).
	msg     dns.Msg
	qs      [1]dns.Question
	extra   [1]dns.RR
	opt     dns.OPT
	options [1]dns.EDNS0
	edeVal  dns.EDNS0_EDE
	dnsRec  record.DNS
	answers [4]string
	hit     resolver.Result // a cache hit's
}

// stage is where a query stands. Its transitions are the methods below,
// and nothing else sets it:
//
//	received ─detachOnce→ detached (a reader's query, before it waits)
//	received, detached ─answered→ answered (a reader's query), or recorded
//	answered ─recorded→ recorded (recordNow, once the answer was sent)
//	received ─recorded→ recorded (over the rate: counted, no record)
type stage uint8

const (
	received stage = iota // being answered by the goroutine that read it
	detached              // being answered by a goroutine of its own
	answered              // answered; its record waits until the answer was sent
	recorded              // recorded, or counted in its client's summary: done
)

// setEDE sets the Extended DNS Error of the answer (RFC 8914).
func (qr *query) setEDE(code uint16, text string) {
	qr.edeVal = dns.EDNS0_EDE{InfoCode: code, ExtraText: text}
	qr.ede = &qr.edeVal
}

// detachOnce calls detach, the first time only, and moves a reader's
// query from received to detached; a query without detach stays.
func (qr *query) detachOnce() {
	if qr.detach != nil && qr.stage == received {
		qr.detach()
		qr.stage = detached
	}
}

// answered notes that resp answers qr and reports whether its record is
// due now: false for a reader's query, whose record waits with resp
// (unrecorded) until its answer was sent.
func (qr *query) answered(resp *dns.Msg) bool {
	if qr.detach == nil {
		return true
	}
	qr.rec.Time = time.Now() // the answer's time
	qr.stage, qr.resp = answered, resp
	return false
}

// unrecorded is the answer whose record waits; nil at any other stage.
func (qr *query) unrecorded() *dns.Msg {
	if qr.stage != answered {
		return nil
	}
	return qr.resp
}

// recorded ends qr: its record is written, or it was counted in its
// client's summary.
func (qr *query) recorded() { qr.stage, qr.resp = recorded, nil }
