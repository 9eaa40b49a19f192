package sampler

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/percpu"
	"github.com/profd/profd/internal/procfs"
)

// Per-thread mode of the ring back end: each target has, for every thread it had when added,
// one inheriting event per CPU. perf_mmap refuses inherited events with cpu == -1, so each
// target's first event on a CPU owns that CPU's ring and its other events there write to it
// (PERF_EVENT_IOC_SET_OUTPUT). Threads started later inherit their creator's events.

// threadEvents are one per-thread target's events: rings[i] owns the ring of cpus[i]; the
// followers write to the ring of their CPU.
type threadEvents struct {
	rings     []*perf.Event
	followers []*perf.Event
}

func (te *threadEvents) close() {
	for _, ev := range te.followers {
		ev.Close()
	}
	for _, ev := range te.rings {
		if ev != nil {
			ev.Close()
		}
	}
}

func (te *threadEvents) all() []*perf.Event {
	var out []*perf.Event
	for _, ev := range te.rings {
		if ev != nil {
			out = append(out, ev)
		}
	}
	return append(out, te.followers...)
}

// reapLocked closes the events of per-thread targets that exited, after reading their rings;
// their counts stay until drained.
func (s *ringSampler) reapLocked() {
	for pid, te := range s.threads {
		if unix.Kill(int(pid), 0) != unix.ESRCH {
			continue
		}
		s.dropThreadsLocked(pid, te)
		s.log.Debug("sampler: target exited", "pid", pid)
	}
}

// dropThreadsLocked reads the rings of a per-thread target and closes its events.
func (s *ringSampler) dropThreadsLocked(pid uint32, te *threadEvents) {
	for _, ev := range te.rings {
		if ev != nil {
			s.readRingLocked(ev)
		}
	}
	te.close()
	delete(s.threads, pid)
}

// openThreads opens inheriting events on every thread of pid. It lists the threads until a
// pass finds none it has not seen: a thread created during a pass by a thread that had no
// event yet is caught by the next pass.
func (s *ringSampler) openThreads(pid uint32, te *threadEvents) error {
	seen := make(map[int]bool)
	for {
		entries, err := os.ReadDir("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || seen[tid] {
				continue
			}
			seen[tid] = true
			fresh++
			if err := s.openThread(tid, te); err != nil {
				return err
			}
		}
		if fresh == 0 {
			return nil
		}
	}
}

// openThread opens tid's events, one per CPU.
func (s *ringSampler) openThread(tid int, te *threadEvents) error {
	for i, cpu := range s.cpus {
		ev, err := s.openEvent(tid, cpu, true)
		if errors.Is(err, unix.ESRCH) {
			return nil // the thread exited meanwhile
		}
		if err != nil {
			return fmt.Errorf("thread %d: %w", tid, err)
		}
		if te.rings[i] == nil {
			if err := s.mapRing(ev); err != nil {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			te.rings[i] = ev
		} else {
			if err := ev.SetOutput(te.rings[i]); err != nil {
				ev.Close()
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			te.followers = append(te.followers, ev)
		}
		if s.started {
			if err := ev.Enable(); err != nil {
				return fmt.Errorf("thread %d: enable: %w", tid, err)
			}
		}
	}
	return nil
}

// checkThreadCPUsLocked says once, in per-thread mode, that a CPU came online that was not
// at the start: the targets' events are bound to those CPUs, so their threads go unsampled
// while they run on it. (An event bound to a thread and a CPU, unlike one bound to a CPU
// alone, lives on while its CPU is offline, and counts again when it is back.) Called with
// mu held.
func (s *ringSampler) checkThreadCPUsLocked(now time.Time) {
	if s.cpusWarned || now.Sub(s.cpusChecked) < percpu.CheckEvery {
		return
	}
	s.cpusChecked = now
	online, err := procfs.OnlineCPUs()
	if err != nil {
		return
	}
	for _, cpu := range online {
		if !slices.Contains(s.cpus, cpu) {
			s.cpusWarned = true
			s.log.Warn("sampler: a CPU came online that was not at the start: the per-thread rings do not sample it (as root, the per-CPU back ends do)",
				"cpu", cpu, "at_start", s.cpus)
			return
		}
	}
}
