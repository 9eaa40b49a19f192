package daemon

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/jitmap"
)

// queuedBatches is how many batches a target's queue holds before its sources wait.
const queuedBatches = 256

// maxLoggedBadRecords bounds the log lines one target's bad records produce; the counters
// still count every one.
const maxLoggedBadRecords = 10

// symbolStage takes the batches the symbol sources (FIFOs, files) decode and applies them,
// per target in order, on a goroutine per target: filling in what records leave out
// (enrich: code bytes, discriminators; it may wait for the JIT) never holds up a source's
// reader or another target.
type symbolStage struct {
	enrich *enrich.Enricher
	apply  func(jitmap.Batch)
	log    *slog.Logger

	mu     sync.Mutex
	queues map[uint32]*symbolQueue
	bad    uint64 // bad records reported by the decoders
}

// symbolQueue is one target's batches and the goroutine applying them.
type symbolQueue struct {
	mu      sync.RWMutex // senders hold it shared, so closing waits for them
	closed  bool
	batches chan jitmap.Batch
	done    chan struct{}
	logged  int // the queue's goroutine's
}

func newSymbolStage(e *enrich.Enricher, apply func(jitmap.Batch), log *slog.Logger) *symbolStage {
	return &symbolStage{enrich: e, apply: apply, log: log, queues: map[uint32]*symbolQueue{}}
}

// addTarget starts pid's queue; call it before pid's sources.
func (s *symbolStage) addTarget(pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues[pid] != nil {
		return
	}
	q := &symbolQueue{batches: make(chan jitmap.Batch, queuedBatches), done: make(chan struct{})}
	s.queues[pid] = q
	go s.run(q)
}

// removeTarget applies what pid's queue holds and stops it; call it after pid's sources
// have delivered their last batch.
func (s *symbolStage) removeTarget(pid uint32) {
	s.mu.Lock()
	q := s.queues[pid]
	delete(s.queues, pid)
	s.mu.Unlock()
	if q == nil {
		return
	}
	q.mu.Lock()
	q.closed = true
	close(q.batches)
	q.mu.Unlock()
	<-q.done
	s.enrich.Forget(pid)
}

// close stops every queue after applying what it holds.
func (s *symbolStage) close() {
	s.mu.Lock()
	pids := make([]uint32, 0, len(s.queues))
	for pid := range s.queues {
		pids = append(pids, pid)
	}
	s.mu.Unlock()
	for _, pid := range pids {
		s.removeTarget(pid)
	}
}

// add queues b for its target; the sources' handler. A batch of a target that has no queue
// (it was removed) is dropped.
func (s *symbolStage) add(b jitmap.Batch) {
	s.mu.Lock()
	q := s.queues[b.Pid]
	s.mu.Unlock()
	if q == nil {
		return
	}
	// A full queue makes the source wait (its goroutine only); the channel is not closed
	// while a sender holds the read lock.
	q.mu.RLock()
	if !q.closed {
		q.batches <- b
	}
	q.mu.RUnlock()
}

// badRecords is how many bad records the decoders reported.
func (s *symbolStage) badRecords() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bad
}

func (s *symbolStage) run(q *symbolQueue) {
	defer close(q.done)
	for b := range q.batches {
		s.report(q, b)
		for _, ev := range b.Events {
			if load, ok := ev.(*jitmap.CodeLoad); ok {
				s.enrich.Load(load)
			}
		}
		if len(b.Events) > 0 {
			s.apply(b)
		}
	}
}

// report counts b's bad records and logs the first few of its target.
func (s *symbolStage) report(q *symbolQueue, b jitmap.Batch) {
	bad := 0
	for _, err := range b.Errs {
		if errors.Is(err, jitmap.ErrPidMismatch) {
			continue // counted by the source
		}
		bad++
		q.logged++
		if q.logged > maxLoggedBadRecords {
			continue
		}
		attrs := []any{"pid", b.Pid, "source", b.Source.String(), "stream", b.Stream, "err", err}
		var de *jitmap.DecodeError
		if errors.As(err, &de) {
			attrs = append(attrs, "offset", de.Offset)
		}
		if q.logged == maxLoggedBadRecords {
			attrs = append(attrs, "note", "further bad records of this target are counted, not logged")
		}
		s.log.Warn("profd: bad symbol record", attrs...)
	}
	if bad > 0 {
		s.mu.Lock()
		s.bad += uint64(bad)
		s.mu.Unlock()
	}
}
