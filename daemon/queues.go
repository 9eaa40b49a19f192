package daemon

import (
	"sync"
	"sync/atomic"
)

// targetChange is a target's setup (its symbol sources) or its retirement, queued by the
// watcher's handlers for the change goroutine.
type targetChange struct {
	pid     uint32
	removed bool
	missed  bool // removed: the sampler refused it
}

// changeQueue holds the target changes the watcher's handlers queued; its goroutine
// (changeLoop) applies them in order, in batches, so that the handlers return at once and
// a storm of short-lived targets costs one drain per batch of exits, not one per exit.
type changeQueue struct {
	mu      sync.Mutex
	pending []targetChange
	// removing counts the queued retirements of each pid, until they are applied: a process
	// that reuses the pid waits for them (daemon.addTarget).
	removing map[uint32]int
	wake     chan struct{}
	// applying is held while a batch is applied, by the goroutine or by a handler that
	// needs a pid's retirement done.
	applying sync.Mutex
	stop     chan struct{}
	wg       sync.WaitGroup
	started  bool
}

// targetCounts are the counters of targets, shown with the summary.
type targetCounts struct {
	added atomic.Uint64
	// missed: processes the watcher reported that could not be sampled (gone before they
	// were added, or the sampler refused them).
	missed atomic.Uint64
	// late: processes that exited before the watcher made them targets, added from their
	// samples (strays).
	late atomic.Uint64
	// exitedEarly: added processes that exited before their symbol sources were set up.
	exitedEarly atomic.Uint64
	// waitWarned holds the users warned of for reaching --max-targets-per-user, and
	// totalWarned whether --max-targets was; only the watcher's handler (targetWaits)
	// touches them.
	waitWarned  map[uint32]bool
	totalWarned bool
}

func (q *changeQueue) init() {
	q.removing, q.wake, q.stop = map[uint32]int{}, make(chan struct{}, 1), make(chan struct{})
}

// push queues c and wakes the goroutine.
func (q *changeQueue) push(c targetChange) {
	q.mu.Lock()
	q.pending = append(q.pending, c)
	if c.removed {
		q.removing[c.pid]++
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the queued changes and empties the queue.
func (q *changeQueue) take() []targetChange {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch := q.pending
	q.pending = nil
	return batch
}

// retiring reports whether a retirement of pid is queued or being applied.
func (q *changeQueue) retiring(pid uint32) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.removing[pid] > 0
}

// retired notes that batch's retirements are applied.
func (q *changeQueue) retired(batch []targetChange) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range batch {
		if !c.removed {
			continue
		}
		if q.removing[c.pid]--; q.removing[c.pid] <= 0 {
			delete(q.removing, c.pid)
		}
	}
}

// arrivals are the targets being added: sampled already, counted not yet.
type arrivals struct {
	mu    sync.Mutex
	addNs map[uint32]int64 // when each was added
}

func (a *arrivals) add(pid uint32, nowNs int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.addNs == nil {
		a.addNs = map[uint32]int64{}
	}
	a.addNs[pid] = nowNs
}

// waiting reports whether any target is being added.
func (a *arrivals) waiting() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.addNs) > 0
}

// take removes pid and returns when it was added (now, if it was not an arrival).
func (a *arrivals) take(pid uint32) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns, ok := a.addNs[pid]
	if !ok {
		return monotonicNs(), false
	}
	delete(a.addNs, pid)
	return ns, true
}

// lingerSet holds the exited targets kept for their heirs (lingers). It has a lock of its
// own, so that adding a target, on the watcher's goroutine, never waits for the daemon's.
type lingerSet struct {
	mu   sync.Mutex
	pids map[uint32]bool
}

func (s *lingerSet) add(pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pids == nil {
		s.pids = map[uint32]bool{}
	}
	s.pids[pid] = true
}

// has reports whether pid is in the set.
func (s *lingerSet) has(pid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[pid]
}

// take removes pid and reports whether it was there.
func (s *lingerSet) take(pid uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.pids[pid]
	delete(s.pids, pid)
	return was
}

// takeUnless removes and returns the pids for which keep is false.
func (s *lingerSet) takeUnless(keep func(pid uint32) bool) []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint32
	for pid := range s.pids {
		if !keep(pid) {
			out = append(out, pid)
			delete(s.pids, pid)
		}
	}
	return out
}
