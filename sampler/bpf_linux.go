package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	perf "github.com/elastic/go-perf"

	"github.com/profd/profd/bpf"
	"github.com/profd/profd/internal/percpu"
	"github.com/profd/profd/internal/procfs"
)

// bpfSampler opens one event per CPU, all processes, and attaches the BPF program to each;
// the program keeps the targets' samples and counts them in the kernel.
type bpfSampler struct {
	choice EventChoice
	log    *slog.Logger

	stacks     bool       // the program counts by call chain: Drain derives the counts from the stacks
	allCgroups bool       // Config.AllCgroups
	jitterHz   float64    // the rate the events' intervals vary around; 0: fixed (see JitterEvery)
	attr       *perf.Attr // each CPU's event's
	mu         sync.Mutex // guards events, closed and started
	prog       *bpf.Program
	events     percpu.Events
	closed     bool
	// leaves, with stacks by frame pointers, decides the words at the stack pointer the
	// program keeps (leafcallers.go); retired the targets removed since the last Drain,
	// forgotten once it has settled their stacks.
	leaves  *leafCallers
	retired map[uint32]struct{}
	// jitText is the span of each target's JIT code (JITCode); textMu guards it, and is
	// taken while the Go code's reader holds its own lock (noGoText): no other lock is taken
	// under it.
	textMu  sync.Mutex
	jitText map[uint32][2]uint64

	started bool
	cancel  context.CancelFunc // stops the interval jitter
	wg      sync.WaitGroup
}

func newBPFSampler(cfg Config, choice EventChoice, spec eventSpec) (*bpfSampler, error) {
	prog, err := bpf.Load(bpf.Config{MaxEntries: cfg.MapEntries, Stacks: cfg.Stacks,
		KernelStacks: cfg.Stacks && cfg.KernelStacks, AllBut: cfg.allBut(), AllUIDs: cfg.AllUIDs,
		AllCgroups: cfg.AllCgroups})
	if err != nil {
		return nil, fmt.Errorf("sampler: bpf back end: %w", err)
	}
	s := &bpfSampler{choice: choice, log: cfg.Logger, prog: prog, stacks: cfg.Stacks, allCgroups: cfg.AllCgroups,
		jitterHz: jitterHz(cfg, spec), attr: spec.attr(cfg, choice.PreciseIP, false), cancel: func() {},
		retired: map[uint32]struct{}{}, jitText: map[uint32][2]uint64{}}
	s.leaves = newLeafCallers(cfg, func(pid uint32, lo, hi uint64) { logTextErr(s.log, pid, prog.SetGoText(pid, lo, hi)) },
		s.noGoText)
	cpus, err := procfs.OnlineCPUs()
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, cpu := range cpus {
		ev, err := s.openCPU(cpu)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.events.Add(cpu, ev)
	}
	return s, nil
}

// openCPU opens cpu's event, the program attached.
func (s *bpfSampler) openCPU(cpu int) (*perf.Event, error) {
	ev, err := perf.Open(s.attr, perf.AllThreads, cpu, nil)
	if err != nil {
		return nil, fmt.Errorf("sampler: bpf back end: event %s on cpu %d: %w", s.choice.Used, cpu, err)
	}
	if err := ev.SetBPF(uint32(s.prog.FD())); err != nil {
		ev.Close()
		return nil, fmt.Errorf("sampler: bpf back end: attach program on cpu %d: %w", cpu, err)
	}
	return ev, nil
}

// checkCPUsLocked opens events again on the CPUs that went offline and came back, and on
// those online for the first time (percpu.Events). Called with mu held.
func (s *bpfSampler) checkCPUsLocked(now time.Time) {
	followCPUs(&s.events, now, s.log, s.openCPU, func(ev *perf.Event) { ev.Close() })
}

// Start enables the events and, for a timer event, starts varying their intervals (see
// JitterEvery) until ctx is done or Close.
func (s *bpfSampler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return nil
	}
	for i, ev := range s.events.List() {
		if err := ev.Enable(); err != nil {
			return fmt.Errorf("sampler: enable event %d: %w", i, err)
		}
	}
	s.events.Enabled(time.Now())
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	startJitter(ctx, &s.wg, s.jitterHz, s.log, &s.mu, func() []*perf.Event { return s.events.List() })
	return nil
}

func (s *bpfSampler) AddTarget(pid uint32) error {
	if err := checkProcess(pid); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.prog.AddTarget(pid); err != nil {
		return err
	}
	if s.leaves != nil {
		// Every sample keeps its word until the executable is read (a Go program's first
		// milliseconds are as often its hottest): Drain settles them by what was read.
		delete(s.retired, pid)
		s.textMu.Lock()
		delete(s.jitText, pid) // another program's, if any
		s.textMu.Unlock()
		logTextErr(s.log, pid, s.prog.SetGoText(pid, 0, ^uint64(0)))
		s.leaves.Add(pid)
	}
	return nil
}

func (s *bpfSampler) RemoveTarget(pid uint32) error {
	if s.isClosed() {
		return ErrClosed
	}
	if pid == 0 {
		return nil
	}
	s.mu.Lock()
	if s.leaves != nil {
		s.retired[pid] = struct{}{} // its last stacks are settled by the next Drain
	}
	s.mu.Unlock()
	return s.prog.RemoveTarget(pid)
}

func (s *bpfSampler) SetCgroups(ids []uint64) error {
	if s.isClosed() {
		return ErrClosed
	}
	if !s.allCgroups {
		return nil
	}
	return s.prog.SetCgroups(ids)
}

func (s *bpfSampler) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// DrainAll is Drain: the BPF back end walks no stack, and holds no sample.
func (s *bpfSampler) DrainAll() (Drained, error) { return s.Drain() }

func (s *bpfSampler) Drain(...uint32) (Drained, error) {
	s.mu.Lock()
	if !s.closed {
		s.checkCPUsLocked(time.Now())
	}
	retired := s.retired
	if len(retired) > 0 {
		s.retired = map[uint32]struct{}{}
	}
	s.mu.Unlock()
	counts := make(map[Key]Count)
	var stacks []StackCount
	var err error
	if s.stacks {
		// The program counts by chain only; the counts are the user-mode leaves.
		err = s.prog.DrainStacks(func(st bpf.Stack, c bpf.Count) {
			sc := StackCount{PID: st.Tgid, TID: st.Tid, Comm: st.Comm, Truncated: st.Truncated,
				User:      append(make([]uint64, 0, len(st.User)+min(len(st.Words), 1)), st.User...), // room for a word
				wordSlots: st.WordSlots}
			sc.nwords = uint8(copy(sc.words[:], st.Words))
			if st.KernelMode {
				sc.Kernel = slices.Clone(st.Kernel)
			}
			sc.add(c.N, int64(c.FirstNs), int64(c.LastNs))
			stacks = append(stacks, sc)
			if !st.KernelMode && len(st.User) > 0 { // kernel-mode samples count as Kernel
				addCount(counts, Key{PID: st.Tgid, IP: st.User[0]}, c.N, int64(c.FirstNs), int64(c.LastNs))
			}
		})
	} else {
		err = s.prog.Drain(func(tgid uint32, ip uint64, c bpf.Count) {
			addCount(counts, Key{PID: tgid, IP: ip}, c.N, int64(c.FirstNs), int64(c.LastNs))
		})
	}
	d := Drained{Counts: counts, Stacks: stacks}
	if s.leaves != nil {
		s.leaves.Recheck()
		s.leaves.settleWords(stacks)
		s.forget(retired)
		d.Undescribed = s.leaves.takeWaiting()
	}
	if err != nil {
		if errors.Is(err, os.ErrClosed) {
			return Drained{}, ErrClosed
		}
		return d, fmt.Errorf("sampler: %w", err)
	}
	return d, nil
}

// forget drops the Go code of the targets in retired that were not added again since.
func (s *bpfSampler) forget(retired map[uint32]struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid := range retired {
		if s.prog.IsTarget(pid) {
			continue // added again
		}
		s.leaves.Forget(pid)
		s.textMu.Lock()
		delete(s.jitText, pid)
		s.textMu.Unlock()
		logTextErr(s.log, pid, s.prog.ForgetText(pid)) // Found may have set it since RemoveTarget
	}
}

// noGoText is told that process pid runs no Go code: its range is its JIT code's, if
// JITCode gave one, else none.
func (s *bpfSampler) noGoText(pid uint32) {
	s.textMu.Lock()
	defer s.textMu.Unlock()
	if r, ok := s.jitText[pid]; ok {
		logTextErr(s.log, pid, s.prog.SetJITText(pid, r[0], r[1]))
	} else {
		logTextErr(s.log, pid, s.prog.ForgetText(pid))
	}
}

func (s *bpfSampler) JITCode(pid uint32, lo, hi uint64) {
	if s.leaves == nil || lo >= hi {
		return
	}
	s.textMu.Lock()
	defer s.textMu.Unlock()
	r, ok := s.jitText[pid]
	if ok && lo >= r[0] && hi <= r[1] {
		return
	}
	if ok {
		lo, hi = min(lo, r[0]), max(hi, r[1])
	}
	s.jitText[pid] = [2]uint64{lo, hi}
	logTextErr(s.log, pid, s.prog.SetJITText(pid, lo, hi))
}

func (s *bpfSampler) Stats() Stats {
	if s.isClosed() {
		return Stats{}
	}
	st, err := s.prog.Stats()
	if err != nil {
		s.log.Debug("sampler: bpf stats", "err", err)
		return Stats{}
	}
	return Stats{Samples: st.Samples, Dropped: st.Dropped, Outside: st.Outside, Kernel: st.Kernel}
}

func (s *bpfSampler) Event() EventChoice { return s.choice }
func (s *bpfSampler) Backend() Backend   { return BackendBPF }

func (s *bpfSampler) Close() error {
	s.mu.Lock()
	cancel := s.cancel
	s.started = true // a Start racing with Close starts no jitter after the Wait below
	s.mu.Unlock()
	cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.leaves != nil {
		s.leaves.Close()
	}
	var errs []error
	for _, err := range s.events.Close() {
		errs = append(errs, fmt.Errorf("sampler: close event: %w", err))
	}
	if err := s.prog.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
