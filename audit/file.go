package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"
)

// FileConfig configures the --audit-file writer.
type FileConfig struct {
	// Path of the file; required. It is opened for append and created with
	// mode 0640 when missing.
	Path string
	// MaxSizeMiB rotates the file once a batch would take it past this
	// size (--audit-file-max-size): it is renamed with a timestamp
	// (audit-2026-01-02T15-04-05.000.jsonl beside audit.jsonl) and a new
	// one is created. Zero means no size rotation; logrotate (create mode,
	// postrotate SIGHUP) may still rotate it.
	MaxSizeMiB int
	// MaxBackups is how many rotated files are kept
	// (--audit-file-max-backups); zero keeps them all.
	MaxBackups int
	// OnRotate, when set, is called (on a goroutine of its own) after each
	// size rotation: the Logger's Checkpoint, so that the new file starts
	// with a checkpoint of everything before it.
	OnRotate func()
}

// File is the --audit-file writer: an append-only file that can be
// reopened (SIGHUP after logrotate) and, with MaxSizeMiB, rotates by size
// through lumberjack. The Logger writes to it a batch of whole records per
// Write, and rotation happens only between two Writes, so no record is
// split across files. It is safe for concurrent use.
type File struct {
	path string

	mu   sync.Mutex
	f    *os.File           // without size rotation; nil after a failed reopen
	lj   *lumberjack.Logger // with size rotation
	max  int64              // bytes, with size rotation
	size int64              // of the current file; -1 until known
	last time.Time          // of the last rotation

	onRotate func()
}

// OpenFile opens (or creates) the audit file now, so that a path that
// cannot be written is an error at startup.
func OpenFile(cfg FileConfig) (*File, error) {
	if cfg.Path == "" {
		return nil, errors.New("audit: file: no path")
	}
	if cfg.MaxSizeMiB < 0 || cfg.MaxBackups < 0 {
		return nil, fmt.Errorf("audit: file %s: negative size or backups", cfg.Path)
	}
	f := &File{path: cfg.Path, size: -1, onRotate: cfg.OnRotate}
	// Created here, not by lumberjack (which creates 0600): rotations keep
	// the mode of the file they replace.
	fd, err := os.OpenFile(cfg.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("audit: file: %w", err)
	}
	if cfg.MaxSizeMiB == 0 {
		f.f = fd
		return f, nil
	}
	_ = fd.Close()
	f.max = int64(cfg.MaxSizeMiB) << 20
	f.lj = &lumberjack.Logger{Filename: cfg.Path, MaxSize: cfg.MaxSizeMiB, MaxBackups: cfg.MaxBackups}
	if _, err := f.Write(nil); err != nil { // opens it
		return nil, err
	}
	return f, nil
}

// Name returns the file's path.
func (f *File) Name() string { return f.path }

// Write appends p, which the Logger makes whole records. A file that could
// not be reopened is opened again first; with size rotation, the file is
// rotated before p when p would take it past the size.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lj == nil {
		if f.f == nil {
			fd, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
			if err != nil {
				return 0, fmt.Errorf("audit: file: %w", err)
			}
			f.f = fd
		}
		return f.f.Write(p)
	}
	if f.size < 0 {
		fi, err := os.Stat(f.path)
		switch {
		case err == nil:
			f.size = fi.Size()
		case errors.Is(err, fs.ErrNotExist):
			f.size = 0
		default:
			return 0, fmt.Errorf("audit: file: %w", err)
		}
	}
	// Rotate here rather than inside lumberjack's Write, for two reasons:
	// a rotation then happens only between two batches, and never twice in
	// one millisecond (lumberjack names backups by the millisecond, so a
	// second rotation in the same one would rename over the first).
	if f.size > 0 && f.size+int64(len(p)) >= f.max {
		if next := f.last.Truncate(time.Millisecond).Add(time.Millisecond); time.Now().Before(next) {
			time.Sleep(time.Until(next)) // at most a millisecond, on the sink's goroutine
		}
		err := f.lj.Rotate()
		f.last = time.Now()
		if err != nil {
			f.size = -1
			return 0, fmt.Errorf("audit: file: rotate: %w", err)
		}
		f.size = 0
		if f.onRotate != nil {
			go f.onRotate()
		}
	}
	n, err := f.lj.Write(p)
	f.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("audit: file: %w", err)
	}
	return n, nil
}

// Reopen closes the file and opens its path again: after logrotate renamed
// it (create mode), records go to the new file. If the open fails the next
// Write tries again, and the Logger buffers and retries until it succeeds.
func (f *File) Reopen() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lj != nil {
		f.size = -1
		if err := f.lj.Close(); err != nil {
			return fmt.Errorf("audit: file: close: %w", err)
		}
		if _, err := f.lj.Write(nil); err != nil { // opens the path
			return fmt.Errorf("audit: file: reopen: %w", err)
		}
		return nil
	}
	var closeErr error
	if f.f != nil {
		closeErr = f.f.Close()
		f.f = nil
	}
	fd, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("audit: file: reopen: %w", err)
	}
	f.f = fd
	if closeErr != nil {
		return fmt.Errorf("audit: file: close: %w", closeErr)
	}
	return nil
}

// Close closes the file. Close the Logger first: it flushes into the file.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lj != nil {
		return f.lj.Close()
	}
	if f.f == nil {
		return nil
	}
	err := f.f.Close()
	f.f = nil
	return err
}
