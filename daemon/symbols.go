package daemon

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/profd/profd/internal/enrich"
	"github.com/profd/profd/jitmap"
)

// queuedBatches is how many batches a target's queue holds before its sources wait (a
// batch is one read: at most 64 KiB of records).
const queuedBatches = 64

// maxLoggedBadRecords bounds the log lines one target's bad records produce; the counters
// still count every one.
const maxLoggedBadRecords = 10

// symbolStage takes the batches the symbol sources (FIFOs, files) decode and applies them,
// per target in order, on a goroutine per target: filling in what records leave out
// (enrich: code bytes, discriminators; it may wait for the JIT) never holds up a source's
// reader or another target.
//
// Each target may send rate records per second, saving up to burst: past that, its
// records are dropped and counted, with one warning. Files are not cut so: their reader
// asks ready before each read and leaves what the allowance does not cover in the file for
// later (a perf map written long before profd started is read at the budget's pace), and
// their batches, addPaced's, may overrun it by one read. Once the stage expires (the daemon is
// stopping and its deadline for symbols passed), what is queued or still sent is dropped
// and counted instead of applied.
type symbolStage struct {
	enrich *enrich.Enricher
	apply  func(jitmap.Batch)
	log    *slog.Logger
	rate   float64 // records per second per target; 0: no bound
	burst  float64

	mu     sync.Mutex
	queues map[uint32]*symbolQueue
	bad    uint64 // bad records reported by the decoders
	// otherPid counts records that named a process other than their stream's (neither its
	// pid nor the one it has in its own pid namespace).
	otherPid uint64

	expired    chan struct{} // closed when the stage expires
	expireOnce sync.Once
	overRate   atomic.Uint64 // records dropped past a target's rate
	unapplied  atomic.Uint64 // records dropped because the stage expired

	// added gets a token when a target's queue is made: the walks of registered objects
	// (registered.go) wait on it between targets due.
	added chan struct{}
}

// symbolQueue is one target's batches and the goroutine applying them.
type symbolQueue struct {
	pid     uint32
	mu      sync.RWMutex // senders hold it shared, so closing waits for them
	closed  bool
	batches chan jitmap.Batch
	done    chan struct{}
	logged  int  // the queue's goroutine's
	otherOK bool // a record of another process was logged; the queue's goroutine's
	clockOK bool // a jitdump of another clock was logged; the queue's goroutine's

	budgetMu sync.Mutex // the sources' goroutines share the allowance
	tokens   float64
	lastNs   int64
	warned   bool
	paced    bool // ready said no once: logged
}

// newSymbolStage makes the stage; rate and burst bound each target's records (0: no bound).
func newSymbolStage(e *enrich.Enricher, apply func(jitmap.Batch), log *slog.Logger, rate, burst int) *symbolStage {
	return &symbolStage{enrich: e, apply: apply, log: log, rate: float64(rate), burst: float64(burst),
		queues: map[uint32]*symbolQueue{}, expired: make(chan struct{}), added: make(chan struct{}, 1)}
}

// expireAt makes the stage expire at t: from then on records are counted, not applied.
func (s *symbolStage) expireAt(t time.Time) {
	time.AfterFunc(time.Until(t), func() { s.expireOnce.Do(func() { close(s.expired) }) })
}

func (s *symbolStage) isExpired() bool {
	select {
	case <-s.expired:
		return true
	default:
		return false
	}
}

// addTarget starts pid's queue; call it before pid's sources.
func (s *symbolStage) addTarget(pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queues[pid] != nil {
		return
	}
	q := &symbolQueue{pid: pid, batches: make(chan jitmap.Batch, queuedBatches), done: make(chan struct{}),
		tokens: s.burst, lastNs: monotonicNs()}
	s.queues[pid] = q
	go s.applyQueue(q)
	select {
	case s.added <- struct{}{}:
	default: // a token is waiting already
	}
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

// forgetProgram drops what the stage keeps of the program target pid ran before an exec
// (what enrich read of its memory), keeping its queue: the records of the program it runs
// now come through it.
func (s *symbolStage) forgetProgram(pid uint32) { s.enrich.Forget(pid) }

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

// add queues b for its target, cut at the target's allowance; the FIFOs' handler. A batch
// of a target that has no queue (it was removed) is dropped.
func (s *symbolStage) add(b jitmap.Batch) { s.queue(b, false) }

// addPaced queues b whole, taking it from the allowance; the files' handler (their reader
// asks ready first).
func (s *symbolStage) addPaced(b jitmap.Batch) { s.queue(b, true) }

// ready reports whether target pid has allowance left for another read of its files; the
// first time it has not, that is logged.
func (s *symbolStage) ready(pid uint32) bool {
	s.mu.Lock()
	q := s.queues[pid]
	s.mu.Unlock()
	if q == nil || s.rate <= 0 {
		return true
	}
	q.budgetMu.Lock()
	defer q.budgetMu.Unlock()
	s.refill(q)
	if q.tokens > 0 {
		return true
	}
	if !q.paced {
		q.paced = true
		s.log.Info("profd: target's symbol files hold more records than its budget lets through at once; reading them at its pace",
			"pid", pid, "records_per_s", s.rate, "raise_with", "--max-record-rate")
	}
	return false
}

// has reports whether target pid's symbols are read: it has a queue.
func (s *symbolStage) has(pid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queues[pid] != nil
}

func (s *symbolStage) queue(b jitmap.Batch, paced bool) {
	s.mu.Lock()
	q := s.queues[b.Pid]
	s.mu.Unlock()
	if q == nil {
		return
	}
	if n := s.allow(q, len(b.Events), paced); n < len(b.Events) {
		b.Events = b.Events[:n]
	}
	// A full queue makes the source wait (its goroutine only) until the stage expires; the
	// channel is not closed while a sender holds the read lock.
	q.mu.RLock()
	if !q.closed {
		select {
		case q.batches <- b:
		case <-s.expired:
			s.unapplied.Add(uint64(len(b.Events)))
		}
	}
	q.mu.RUnlock()
}

// allow takes n records from q's allowance and returns how many of them it had; the rest
// are counted as over the rate, and the first time a target passes it is logged. paced
// records are all taken, the allowance going below zero if need be.
func (s *symbolStage) allow(q *symbolQueue, n int, paced bool) int {
	if s.rate <= 0 || n == 0 {
		return n
	}
	q.budgetMu.Lock()
	defer q.budgetMu.Unlock()
	s.refill(q)
	if paced {
		q.tokens -= float64(n)
		return n
	}
	ok := min(n, max(0, int(q.tokens)))
	q.tokens -= float64(ok)
	if ok < n {
		s.overRate.Add(uint64(n - ok))
		if !q.warned {
			q.warned = true
			s.log.Warn("profd: target sends symbol records faster than its budget; the excess is dropped and counted",
				"pid", q.pid, "records_per_s", s.rate, "burst", s.burst, "raise_with", "--max-record-rate")
		}
	}
	return ok
}

// refill adds to q's allowance what the time since the last refill earned. Called with
// q.budgetMu held.
func (s *symbolStage) refill(q *symbolQueue) {
	now := monotonicNs()
	q.tokens = min(s.burst, q.tokens+float64(now-q.lastNs)/1e9*s.rate)
	q.lastNs = now
}

// otherPidRecords is how many records named a process other than their stream's.
func (s *symbolStage) otherPidRecords() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.otherPid
}

// badRecords is how many bad records the decoders reported.
func (s *symbolStage) badRecords() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bad
}

// applyQueue is q's goroutine: it fills in what q's batches leave out and applies them, in order.
func (s *symbolStage) applyQueue(q *symbolQueue) {
	defer close(q.done)
	for b := range q.batches {
		if s.isExpired() {
			s.unapplied.Add(uint64(len(b.Events)))
			continue
		}
		s.report(q, b)
		var loads []*jitmap.CodeLoad
		for _, ev := range b.Events {
			if load, ok := ev.(*jitmap.CodeLoad); ok {
				loads = append(loads, load)
			}
		}
		s.enrich.Load(loads...)
		if len(b.Events) > 0 {
			s.apply(b)
		}
	}
}

// report counts b's bad records and logs the first few of its target.
func (s *symbolStage) report(q *symbolQueue, b jitmap.Batch) {
	bad, other := 0, 0
	for _, err := range b.Errs {
		if errors.Is(err, jitmap.ErrArchTimestamps) || errors.Is(err, jitmap.ErrClockAhead) {
			// Not a bad record: the records are read, timed as they are read.
			if !q.clockOK {
				q.clockOK = true
				s.log.Warn("profd: symbol records timed by another clock than CLOCK_MONOTONIC (cycle counts with JITDUMP_USE_ARCH_TIMESTAMP=1, or a clock ahead of it): profd times them as it reads them, so a sample is named by the code at its address when the record was read; a JIT that writes CLOCK_MONOTONIC times has its samples named exactly",
					"pid", b.Pid, "source", b.Source.String(), "stream", b.Stream, "err", err)
			}
			continue
		}
		if errors.Is(err, jitmap.ErrPidMismatch) {
			other++
			if !q.otherOK {
				q.otherOK = true
				s.log.Warn("profd: symbol records of another process refused (counted, logged once per target)",
					"pid", b.Pid, "source", b.Source.String(), "stream", b.Stream, "err", err)
			}
			continue
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
	if bad+other > 0 {
		s.mu.Lock()
		s.bad += uint64(bad)
		s.otherPid += uint64(other)
		s.mu.Unlock()
	}
}
