package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	perf "github.com/elastic/go-perf"
	"github.com/profd/profd/bpf"
	"github.com/profd/profd/internal/percpu"
	"github.com/profd/profd/internal/procfs"
)

// ringSampler reads perf ring buffers and aggregates in the daemon. In per-CPU mode it opens
// one event per CPU for all processes. In per-thread mode it opens, for every thread a target
// has when it is added and every CPU, an inheriting event (threads started later inherit
// their creator's events); the kernel refuses to mmap inherited events that are not bound to
// a CPU, so each target has one ring per CPU and its other events on that CPU write to it.
type ringSampler struct {
	cfg    Config
	choice EventChoice
	spec   eventSpec
	mode   RingMode
	pages  int
	log    *slog.Logger

	mu       sync.Mutex // guards everything below
	agg      *aggregate
	waiter   *ringWaiter   // wakes readLoop when a ring is half full
	cpuRings percpu.Events // per-CPU mode's events, each with its ring
	// filter, in per-CPU mode where it loads, keeps other processes' samples out of the rings.
	filter  *bpf.RingFilter
	threads map[uint32]*threadEvents // per-thread mode: by target pid
	cpus    []int
	raw     perf.RawRecord
	started bool
	closed  bool
	badLog  bool // a bad record was logged already
	fullLog bool // the held samples' bound was logged already
	// cpusChecked is when per-thread mode last compared the CPUs online with cpus;
	// cpusWarned, that it said a CPU came online that is not among them.
	cpusChecked time.Time
	cpusWarned  bool

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
		if cfg.Unwind != nil && cfg.Stacks {
			pages *= unwindRingFactor // a sample is some 16 KiB, not 100 bytes
		}
	}
	if pages&(pages-1) != 0 {
		return nil, fmt.Errorf("sampler: ring pages %d: not a power of two", pages)
	}
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	s := &ringSampler{
		cfg: cfg, choice: choice, spec: spec, mode: mode, pages: pages, log: cfg.Logger,
		agg: newAggregate(), threads: make(map[uint32]*threadEvents),
		expired: expired, cancel: cancel,
	}
	s.agg.stacks, s.agg.kernel = cfg.Stacks, cfg.Stacks && cfg.KernelStacks
	if cfg.Stacks {
		s.agg.unwind = cfg.Unwind
	}
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		cancel()
		return nil, err
	}
	s.cpus = cpus
	if s.waiter, err = newRingWaiter(); err != nil {
		cancel()
		return nil, err
	}
	switch mode {
	case RingPerCPU:
		s.agg.allBut = cfg.allBut()
		if s.filter, err = bpf.LoadRingFilter(s.agg.allBut, cfg.AllUIDs, cfg.AllCgroups); err != nil {
			s.log.Debug("sampler: no in-kernel filter for the rings; other processes' samples are read and skipped", "err", err)
		}
		for _, cpu := range cpus {
			ev, err := s.openCPU(cpu)
			if err != nil {
				s.Close()
				return nil, err
			}
			s.cpuRings.Add(cpu, ev)
		}
		if s.filter == nil && s.agg.allBut != 0 && (len(cfg.AllUIDs) > 0 || cfg.AllCgroups) {
			// A sample's user and cgroup are known in the kernel alone.
			s.agg.allBut = 0
			s.log.Debug("sampler: without the rings' in-kernel filter, the processes of the users and cgroups asked for are counted only once they are targets")
		}
	case RingPerThread:
	default:
		cancel()
		s.waiter.close()
		return nil, fmt.Errorf("sampler: ring mode %q: want %q or %q", mode, RingPerCPU, RingPerThread)
	}
	s.agg.leaves = newLeafCallers(cfg, nil, nil)
	return s, nil
}

func (s *ringSampler) openEvent(pid, cpu int, inherit bool) (*perf.Event, error) {
	a := s.spec.attr(s.cfg, s.choice.PreciseIP, true)
	a.Options.Inherit = inherit
	// Wake up rarely: the reader sleeps until a ring is half full (or PollEvery passes), and
	// Drain reads what is there.
	a.Options.Watermark = true
	a.Wakeup = uint32(s.pages * os.Getpagesize() / 2)
	ev, err := perf.Open(a, pid, cpu, nil)
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", s.choice.Used, err)
	}
	return ev, nil
}

// openCPU opens cpu's event with its ring and the filter, in per-CPU mode.
func (s *ringSampler) openCPU(cpu int) (*perf.Event, error) {
	ev, err := s.openEvent(perf.AllThreads, cpu, false)
	if err == nil {
		err = s.mapRing(ev)
	}
	if err == nil {
		err = s.attachFilter(ev)
	}
	if err != nil {
		return nil, fmt.Errorf("sampler: ring back end: cpu %d: %w", cpu, err)
	}
	return ev, nil
}

// checkCPUsLocked, in per-CPU mode, opens events again on the CPUs that went offline and
// came back, and on those online for the first time, after reading what the ended events'
// rings hold (percpu.Events). In per-thread mode, a CPU online for the first time is said
// once. Called with mu held.
func (s *ringSampler) checkCPUsLocked(now time.Time) {
	if s.mode == RingPerThread {
		s.checkThreadCPUsLocked(now)
		return
	}
	followCPUs(&s.cpuRings, now, s.log, s.openCPU, func(ev *perf.Event) {
		s.readRingLocked(ev)
		ev.Close()
	})
}

// attachFilter attaches the filter to ev, a per-CPU event. Where the kernel refuses it on
// the first event, the rings go unfiltered; ev is closed when it refuses it on a later one.
func (s *ringSampler) attachFilter(ev *perf.Event) error {
	if s.filter == nil {
		return nil
	}
	err := ev.SetBPF(uint32(s.filter.FD()))
	switch {
	case err == nil:
		return nil
	case len(s.cpuRings.List()) == 0:
		s.log.Debug("sampler: the kernel refuses the rings' filter; other processes' samples are read and skipped", "err", err)
		s.filter.Close()
		s.filter = nil
		return nil
	}
	ev.Close()
	return fmt.Errorf("attach filter: %w", err)
}

// mapRing maps ev's ring, closing ev when that fails.
func (s *ringSampler) mapRing(ev *perf.Event) error {
	if err := ev.MapRingNumPages(s.pages); err != nil {
		ev.Close()
		return fmt.Errorf("map ring of %d pages: %w", s.pages, err)
	}
	if err := s.waiter.add(ev); err != nil {
		ev.Close()
		return err
	}
	return nil
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
	for _, ev := range s.cpuRings.List() {
		if err := ev.Enable(); err != nil {
			return fmt.Errorf("sampler: enable ring event: %w", err)
		}
	}
	s.cpuRings.Enabled(time.Now())
	for pid, te := range s.threads {
		for _, ev := range te.all() {
			if err := ev.Enable(); err != nil {
				return fmt.Errorf("sampler: enable event of pid %d: %w", pid, err)
			}
		}
	}
	s.started = true
	ctx, cancel := context.WithCancel(ctx)
	stop := s.cancel
	s.cancel = func() { cancel(); s.waiter.stop(); stop() }
	s.wg.Add(1)
	go s.readLoop(ctx)
	if s.mode == RingPerCPU {
		startJitter(ctx, &s.wg, jitterHz(s.cfg, s.spec), s.log, &s.mu, func() []*perf.Event { return s.cpuRings.List() })
	}
	return nil
}

// readLoop empties the rings whenever one is half full, and at least every PollEvery, so
// they do not overflow between drains.
func (s *ringSampler) readLoop(ctx context.Context) {
	defer s.wg.Done()
	lastReap := time.Now()
	for {
		if err := s.waiter.wait(s.cfg.PollEvery); err != nil {
			s.log.Warn("sampler: ring wait failed; reading rings every PollEvery", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(s.cfg.PollEvery):
			}
		}
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
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

func (s *ringSampler) readAllLocked() {
	if s.agg.leaves != nil {
		s.agg.leaves.Recheck() // before samples of an executable exec'd are read
	}
	for _, ev := range s.cpuRings.List() {
		s.readRingLocked(ev)
	}
	for _, te := range s.threads {
		for _, ev := range te.rings {
			if ev != nil {
				s.readRingLocked(ev)
			}
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
	if s.agg.held.full && !s.fullLog {
		s.fullLog = true
		s.log.Warn("sampler: samples whose call chains wait for frame information past their bound; "+
			"more are walked as they come, by frame pointers through code not described yet", "bound_mb", maxHeldBytes>>20)
	}
}

func (s *ringSampler) AddTarget(pid uint32) error {
	if err := checkProcess(pid); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.filter != nil {
		if err := s.filter.AddTarget(pid); err != nil {
			return fmt.Errorf("sampler: %w", err)
		}
	}
	s.agg.targets[pid] = struct{}{}
	if s.agg.unwind != nil {
		s.agg.unwind.Prepare(pid)
	}
	if s.agg.leaves != nil {
		s.agg.leaves.Add(pid)
	}
	if s.mode != RingPerThread {
		return nil
	}
	if _, ok := s.threads[pid]; ok {
		return nil
	}
	te := &threadEvents{rings: make([]*perf.Event, len(s.cpus))}
	if err := s.openThreads(pid, te); err != nil {
		te.close()
		delete(s.agg.targets, pid)
		return fmt.Errorf("sampler: add target %d: %w", pid, err)
	}
	s.threads[pid] = te
	return nil
}

func (s *ringSampler) SetCgroups(ids []uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.filter == nil || !s.cfg.AllCgroups {
		return nil // per thread, or no filter: the targets alone are counted
	}
	return s.filter.SetCgroups(ids)
}

// JITCode does nothing: the ring back end asks the tables where the return address lies
// before it looks at a word.
func (s *ringSampler) JITCode(uint32, uint64, uint64) {}

func (s *ringSampler) RemoveTarget(pid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if te, ok := s.threads[pid]; ok {
		s.dropThreadsLocked(pid, te)
	}
	// Read what per-CPU rings hold for pid before it stops counting as a target.
	for _, ev := range s.cpuRings.List() {
		s.readRingLocked(ev)
	}
	delete(s.agg.targets, pid)
	var err error
	if s.filter != nil {
		err = s.filter.RemoveTarget(pid)
	}
	if s.agg.unwind != nil {
		s.agg.release(pid, false, true) // walked while its mappings are known
		s.agg.unwind.Forget(pid)
	}
	if s.agg.leaves != nil {
		s.agg.leaves.Forget(pid)
	}
	if err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	return nil
}

func (s *ringSampler) Drain(gone ...uint32) (Drained, error) { return s.drain(false, gone) }

func (s *ringSampler) DrainAll() (Drained, error) { return s.drain(true, nil) }

func (s *ringSampler) drain(all bool, gone []uint32) (Drained, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Drained{}, ErrClosed
	}
	s.readAllLocked()
	s.checkCPUsLocked(time.Now())
	for _, pid := range gone {
		s.agg.release(pid, false, true)
	}
	return s.agg.take(all), nil
}

func (s *ringSampler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.agg.stats
	if s.filter != nil {
		if n, err := s.filter.Outside(); err == nil {
			st.Outside += n // kept out of the rings by the filter
		}
	}
	return st
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
	if s.waiter != nil {
		defer s.waiter.close() // after the events, which leave its set as they close
	}
	errs := s.cpuRings.Close()
	for _, te := range s.threads {
		te.close()
	}
	if s.filter != nil {
		if err := s.filter.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.threads, s.filter = nil, nil
	if s.agg.leaves != nil {
		s.agg.leaves.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sampler: close: %w", err)
	}
	return nil
}
