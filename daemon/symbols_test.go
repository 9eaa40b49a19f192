package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/internal/testenv"
	"github.com/profd/profd/jitmap"
)

func batchOf(pid uint32, n int) jitmap.Batch {
	b := jitmap.Batch{Pid: pid}
	for i := 0; i < n; i++ {
		b.Events = append(b.Events, &jitmap.CodeUnload{Pid: pid, Addr: uint64(i)})
	}
	return b
}

// TestSymbolStageRate: a target that sends more records than its rate and burst allow has
// the excess dropped and counted, with one warning; another target is not affected.
func TestSymbolStageRate(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	var applied [3]atomic.Int64
	s := newSymbolStage(enrich.New(enrich.Options{}), func(b jitmap.Batch) { applied[b.Pid].Add(int64(len(b.Events))) },
		slog.New(slog.NewTextHandler(logs, nil)), 10, 1000)
	s.addTarget(1)
	s.addTarget(2)
	for i := 0; i < 30; i++ {
		s.add(batchOf(1, 100))
	}
	s.add(batchOf(2, 500))
	s.close()
	// 1000 saved up, plus 10 a second for however long the loop took.
	if got := applied[1].Load(); got < 1000 || got > 1100 {
		t.Errorf("applied %d of target 1's 3000 records, want its burst of 1000", got)
	}
	if got := applied[1].Load() + int64(s.overRate.Load()); got != 3000 {
		t.Errorf("applied and dropped %d of 3000 records", got)
	}
	if got := applied[2].Load(); got != 500 {
		t.Errorf("applied %d of target 2's 500 records", got)
	}
	if n := strings.Count(logs.String(), "faster than its budget"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs)
	}
}

// TestSymbolStageExpiry: once the stage expires, a source blocked on a full queue goes on,
// and what the queue holds is counted instead of applied.
func TestSymbolStageExpiry(t *testing.T) {
	release := make(chan struct{})
	var applied atomic.Int64
	s := newSymbolStage(enrich.New(enrich.Options{}), func(b jitmap.Batch) {
		<-release // a target whose records take long to apply
		applied.Add(int64(len(b.Events)))
	}, slog.New(slog.DiscardHandler), 0, 0)
	s.addTarget(1)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := 0; i < 2*queuedBatches; i++ {
			s.add(batchOf(1, 10))
		}
	}()
	select {
	case <-sent:
		t.Fatal("the source was never held up by the full queue")
	case <-time.After(100 * time.Millisecond):
	}
	s.expireAt(time.Now())
	<-sent
	close(release)
	s.close()
	if got := applied.Load() + int64(s.unapplied.Load()); got != 20*queuedBatches {
		t.Errorf("applied %d and counted %d unapplied of %d records", applied.Load(), s.unapplied.Load(), 20*queuedBatches)
	}
	if s.unapplied.Load() < 10*queuedBatches {
		t.Errorf("only %d records counted unapplied after the stage expired", s.unapplied.Load())
	}
}

// TestSymbolStageCountsOtherProcessRecords: records that name a process other than their
// stream's are counted (the summary's refused) and warned about once per target, not lost
// without a word.
func TestSymbolStageCountsOtherProcessRecords(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	s := newSymbolStage(enrich.New(enrich.Options{}), func(jitmap.Batch) {}, slog.New(slog.NewTextHandler(logs, nil)), 0, 0)
	s.addTarget(1)
	for i := 0; i < 3; i++ {
		b := batchOf(1, 1)
		b.Errs = []error{fmt.Errorf("pid 6 in stream of pid 1: %w", jitmap.ErrPidMismatch), fmt.Errorf("pid 6 in stream of pid 1: %w", jitmap.ErrPidMismatch)}
		s.add(b)
	}
	s.close()
	if n := s.otherPidRecords(); n != 6 {
		t.Errorf("%d records of another process counted, want 6", n)
	}
	if n := s.badRecords(); n != 0 {
		t.Errorf("%d bad records, want none: another process's records are refused, not bad", n)
	}
	if n := strings.Count(logs.String(), "symbol records of another process refused"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs)
	}
}

// TestSymbolStageWarnsOtherClock: a jitdump with cycle-counter times, or one timed ahead of
// CLOCK_MONOTONIC, is warned about once per target, and is no bad record.
func TestSymbolStageWarnsOtherClock(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	s := newSymbolStage(enrich.New(enrich.Options{}), func(jitmap.Batch) {}, slog.New(slog.NewTextHandler(logs, nil)), 0, 0)
	s.addTarget(1)
	for _, err := range []error{jitmap.ErrArchTimestamps, jitmap.ErrClockAhead, jitmap.ErrArchTimestamps} {
		b := batchOf(1, 1) // a session, and more after restarts of the JIT's writer
		b.Errs = []error{&jitmap.DecodeError{Format: jitmap.FormatJitdump, Err: err}}
		s.add(b)
	}
	s.close()
	if n := s.badRecords(); n != 0 {
		t.Errorf("%d bad records, want none", n)
	}
	if n := strings.Count(logs.String(), "symbol records timed by another clock"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs)
	}
}
