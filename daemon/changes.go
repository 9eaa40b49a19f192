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
	// exitedEarly: added processes that exited before their symbol sources were set up.
	exitedEarly atomic.Uint64
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

// startChanges starts the change goroutine; stopChanges stops it.
func (d *daemon) startChanges() {
	d.changes.started = true
	d.changes.wg.Add(1)
	go func() {
		defer d.changes.wg.Done()
		for {
			select {
			case <-d.changes.stop:
				return
			case <-d.changes.wake:
				d.applyChanges()
			}
		}
	}()
}

// stopChanges stops the change goroutine and applies what is still queued. Call it after
// the watcher is closed: nothing is queued after it.
func (d *daemon) stopChanges() {
	if d.changes.started {
		d.changes.started = false
		close(d.changes.stop)
		d.changes.wg.Wait()
	}
	d.applyChanges()
}

// applyChanges applies the queued changes: the setups, except of targets whose retirement
// is in the same batch (they exited already), then the retirements, together.
func (d *daemon) applyChanges() {
	d.changes.applying.Lock()
	defer d.changes.applying.Unlock()
	batch := d.changes.take()
	if len(batch) == 0 {
		return
	}
	gone, missed := map[uint32]bool{}, map[uint32]bool{}
	var retire []uint32
	for _, c := range batch {
		if c.removed {
			gone[c.pid] = true
			retire = append(retire, c.pid)
			if c.missed {
				missed[c.pid] = true
			}
		}
	}
	for _, c := range batch {
		switch {
		case c.removed:
		case gone[c.pid]:
			d.exitedBeforeSetup(c.pid, nil)
		default:
			d.setUpTarget(c.pid)
		}
	}
	if len(retire) > 0 {
		d.retireTargets(retire, missed)
	}
	d.changes.retired(batch)
}
