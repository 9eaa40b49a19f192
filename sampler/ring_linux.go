package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"
)

// ringSampler reads perf ring buffers and aggregates in the daemon. In per-CPU mode it opens
// one event per CPU for all processes; in per-thread mode one inheriting event per thread the
// target has when it is added (threads started later inherit their creator's event and write
// to its ring).
type ringSampler struct {
	cfg    Config
	choice EventChoice
	spec   eventSpec
	mode   RingMode
	pages  int
	log    *slog.Logger

	mu       sync.Mutex // guards everything below
	agg      *aggregate
	cpuRings []*perf.Event
	threads  map[int][]*perf.Event // per-thread mode: target pid → its events
	raw      perf.RawRecord
	started  bool
	closed   bool
	badLog   bool // a bad record was logged already

	expired context.Context // already past its deadline: ReadRawRecord never blocks on it
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// reapEvery is how often per-thread mode looks for targets that exited.
const reapEvery = time.Second

func newRingSampler(cfg Config, choice EventChoice, spec eventSpec) (*ringSampler, error) {
	mode := cfg.RingMode
	if mode == "" {
		mode = RingPerThread
		if os.Geteuid() == 0 {
			mode = RingPerCPU
		}
	}
	pages := cfg.RingPages
	if pages == 0 {
		pages = DefaultRingPages
		if mode == RingPerThread {
			pages = defaultThreadPages
		}
	}
	if pages&(pages-1) != 0 {
		return nil, fmt.Errorf("sampler: ring pages %d: not a power of two", pages)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	s := &ringSampler{
		cfg: cfg, choice: choice, spec: spec, mode: mode, pages: pages, log: cfg.Logger,
		agg: newAggregate(cfg.KeepSamples, cfg.MaxKept), threads: make(map[int][]*perf.Event),
		expired: expired, cancel: cancel,
	}
	switch mode {
	case RingPerCPU:
		cpus, err := onlineCPUs()
		if err != nil {
			s.Close()
			return nil, err
		}
		for _, cpu := range cpus {
			ev, err := s.openRing(perf.AllThreads, cpu, false)
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("sampler: ring back end: cpu %d: %w", cpu, err)
			}
			s.cpuRings = append(s.cpuRings, ev)
		}
	case RingPerThread:
	default:
		cancel()
		return nil, fmt.Errorf("sampler: ring mode %q: want %q or %q", mode, RingPerCPU, RingPerThread)
	}
	return s, nil
}

func (s *ringSampler) openRing(pid, cpu int, inherit bool) (*perf.Event, error) {
	a := s.spec.attr(s.cfg, s.choice.PreciseIP, true)
	a.Options.Inherit = inherit
	// Wake up rarely: the reader polls on a timer and Drain reads what is there.
	a.Options.Watermark = true
	a.Wakeup = uint32(s.pages * os.Getpagesize() / 2)
	ev, err := perf.Open(a, pid, cpu, nil)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", s.choice.Used, err)
	}
	if err := ev.MapRingNumPages(s.pages); err != nil {
		ev.Close()
		return nil, fmt.Errorf("map ring of %d pages: %w", s.pages, err)
	}
	return ev, nil
}

func (s *ringSampler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return nil
	}
	for _, ev := range s.cpuRings {
		if err := ev.Enable(); err != nil {
			return fmt.Errorf("sampler: enable ring event: %w", err)
		}
	}
	for pid, evs := range s.threads {
		for _, ev := range evs {
			if err := ev.Enable(); err != nil {
				return fmt.Errorf("sampler: enable event of pid %d: %w", pid, err)
			}
		}
	}
	s.started = true
	ctx, cancel := context.WithCancel(ctx)
	stop := s.cancel
	s.cancel = func() { cancel(); stop() }
	s.wg.Add(1)
	go s.readLoop(ctx)
	return nil
}

// readLoop empties the rings every PollEvery so they do not overflow between drains.
func (s *ringSampler) readLoop(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.PollEvery)
	defer tick.Stop()
	lastReap := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s.mu.Lock()
			if !s.closed {
				s.readAllLocked()
				if now.Sub(lastReap) >= reapEvery {
					s.reapLocked()
					lastReap = now
				}
			}
			s.mu.Unlock()
		}
	}
}

func (s *ringSampler) readAllLocked() {
	for _, ev := range s.cpuRings {
		s.readRingLocked(ev)
	}
	for _, evs := range s.threads {
		for _, ev := range evs {
			s.readRingLocked(ev)
		}
	}
}

func (s *ringSampler) readRingLocked(ev *perf.Event) {
	for ev.ReadRawRecord(s.expired, &s.raw) == nil {
		if err := s.agg.record(uint32(s.raw.Header.Type), s.raw.Header.Misc, s.raw.Data); err != nil && !s.badLog {
			s.badLog = true
			s.log.Warn("sampler: skipping undecodable perf records", "err", err)
		}
	}
}

// reapLocked closes the events of per-thread targets that exited, after reading their rings;
// their counts stay until drained.
func (s *ringSampler) reapLocked() {
	for pid, evs := range s.threads {
		if unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		for _, ev := range evs {
			s.readRingLocked(ev)
			ev.Close()
		}
		delete(s.threads, pid)
		s.log.Debug("sampler: target exited", "pid", pid)
	}
}

func (s *ringSampler) AddTarget(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("sampler: add target %d: %w", pid, errBadPID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.agg.targets[uint32(pid)] = struct{}{}
	if s.mode != RingPerThread {
		return nil
	}
	if _, ok := s.threads[pid]; ok {
		return nil
	}
	evs, err := s.openThreads(pid)
	if err != nil {
		for _, ev := range evs {
			ev.Close()
		}
		delete(s.agg.targets, uint32(pid))
		return fmt.Errorf("sampler: add target %d: %w", pid, err)
	}
	s.threads[pid] = evs
	return nil
}

// openThreads opens an inheriting event on every thread of pid. It lists the threads until a
// pass finds none it has not seen: a thread created during a pass by a thread that had no
// event yet is caught by the next pass.
func (s *ringSampler) openThreads(pid int) ([]*perf.Event, error) {
	var evs []*perf.Event
	seen := make(map[int]bool)
	for {
		entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return evs, err
		}
		fresh := 0
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || seen[tid] {
				continue
			}
			seen[tid] = true
			fresh++
			ev, err := s.openRing(tid, perf.AnyCPU, true)
			if errors.Is(err, unix.ESRCH) {
				continue // the thread exited meanwhile
			}
			if err != nil {
				return evs, fmt.Errorf("thread %d: %w", tid, err)
			}
			if s.started {
				if err := ev.Enable(); err != nil {
					ev.Close()
					return evs, fmt.Errorf("thread %d: enable: %w", tid, err)
				}
			}
			evs = append(evs, ev)
		}
		if fresh == 0 {
			return evs, nil
		}
	}
}

func (s *ringSampler) RemoveTarget(pid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if evs, ok := s.threads[pid]; ok {
		for _, ev := range evs {
			s.readRingLocked(ev)
			ev.Close()
		}
		delete(s.threads, pid)
	}
	// Read what per-CPU rings hold for pid before it stops counting as a target.
	for _, ev := range s.cpuRings {
		s.readRingLocked(ev)
	}
	delete(s.agg.targets, uint32(pid))
	return nil
}

func (s *ringSampler) Drain() (Drained, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Drained{}, ErrClosed
	}
	s.readAllLocked()
	return s.agg.take(), nil
}

func (s *ringSampler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.agg.stats
}

func (s *ringSampler) Event() EventChoice { return s.choice }
func (s *ringSampler) Backend() Backend   { return BackendRing }

func (s *ringSampler) Close() error {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, ev := range s.cpuRings {
		if err := ev.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, evs := range s.threads {
		for _, ev := range evs {
			if err := ev.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.cpuRings, s.threads = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sampler: close: %w", err)
	}
	return nil
}
