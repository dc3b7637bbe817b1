package audit

import (
	"fmt"

	"github.com/egressd/egressd/evidence"
)

// Checkpoints of the verifiable log (Config.Evidence, --audit-signing-key;
// docs/design.md, "Verifiable records"). Write seals each record (log,
// seq, prev) at the one point where its bytes are queued for every writer,
// so that the tree's order is the stream's; checkpoint records follow every
// CheckpointInterval, at Checkpoint (rotation, reopen) and at Close.

// armCheckpoint starts the wait for the next interval checkpoint; mu is
// not held.
func (l *Logger) armCheckpoint() {
	stop := l.cfg.AfterFunc(l.cfg.CheckpointInterval, func() {
		_ = l.Checkpoint(evidence.TriggerInterval) // a failure is counted
		l.mu.Lock()
		closed := l.closed
		l.mu.Unlock()
		if !closed {
			l.armCheckpoint()
		}
	})
	l.mu.Lock()
	l.stopCheckpoints = stop
	l.mu.Unlock()
}

// Checkpoint writes a checkpoint record of the Evidence log after every
// record written so far; an interval checkpoint only when records were
// written since the last one. Without Evidence it does nothing.
// The audit file calls it (TriggerRotation) when it rotates, Reopen after
// a reopen, and Close (TriggerExit) after the last record.
func (l *Logger) Checkpoint(trigger string) error {
	if l.cfg.Evidence == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkpointLocked(trigger)
}

func (l *Logger) checkpointLocked(trigger string) error {
	ev := l.cfg.Evidence
	if trigger == evidence.TriggerInterval && !ev.Pending() {
		return nil
	}
	// Signed under mu: its place in the stream is right after the last
	// record it covers (an Ed25519 signature, once per checkpoint).
	line, err := ev.Checkpoint(trigger)
	if err != nil {
		l.cfg.Metrics.AuditFailed.Inc()
		return fmt.Errorf("audit: %w", err)
	}
	line = append(line, '\n')
	if lost, _ := l.queueLocked(line, false); lost > 0 {
		l.cfg.Metrics.AuditDropped.Add(float64(lost))
	}
	l.cfg.Metrics.AuditCheckpoints.Inc()
	return nil
}

// Latest returns the latest signed checkpoint note of the Evidence log
// (GET /audit/checkpoint), nil before the first or without Evidence.
func (l *Logger) Latest() []byte {
	if l.cfg.Evidence == nil {
		return nil
	}
	return l.cfg.Evidence.Latest()
}
