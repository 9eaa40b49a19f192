package bpf

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/cilium/ebpf"
)

// ErrNotSupported is returned by Load where the program cannot run: another architecture
// than x86-64, or a kernel or privilege level that refuses it (wrapped with the kernel's
// reason).
var ErrNotSupported = errors.New("bpf: sampling program not supported here")

// DefaultMaxEntries is the default capacity of each counts map, in distinct (tgid, ip) keys.
const DefaultMaxEntries = 1 << 18

// Options configure Load.
type Options struct {
	// MaxEntries caps each of the two counts maps; 0 means DefaultMaxEntries. Samples of a
	// new key that find the map full are dropped and counted (Stats.Dropped).
	MaxEntries uint32
}

// Stats are the program's counters, summed over CPUs, since Load.
type Stats struct {
	Samples uint64 // target samples counted into a map
	Outside uint64 // samples of processes that are not targets
	Dropped uint64 // target samples lost because the counts map was full
	Kernel  uint64 // target samples taken in kernel mode (not attributed to an address)
}

// Stat slots, as in profile.c's enum stat_index.
const (
	statSamples = iota
	statOutside
	statDropped
	statKernel
	statCount
)

// Program is the loaded sampling program and its maps.
type Program struct {
	mu     sync.Mutex // serialises Drain and Close
	objs   profileObjects
	active uint32 // index of the counts map the program writes
	closed bool
	batch  drainBuffers
}

// Load loads the program and creates its maps. The caller attaches FD() to perf events and
// must Close the Program.
func Load(opts Options) (*Program, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("%w: program reads x86-64 registers, this is %s", ErrNotSupported, runtime.GOARCH)
	}
	spec, err := loadProfile()
	if err != nil {
		return nil, fmt.Errorf("bpf: load spec: %w", err)
	}
	entries := opts.MaxEntries
	if entries == 0 {
		entries = DefaultMaxEntries
	}
	spec.Maps[profileMapCounts0].MaxEntries = entries
	spec.Maps[profileMapCounts1].MaxEntries = entries
	p := &Program{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("bpf: load program: %w: %w", ErrNotSupported, err)
	}
	return p, nil
}

// FD is the program's file descriptor, for PERF_EVENT_IOC_SET_BPF. It stays valid until Close.
func (p *Program) FD() int { return p.objs.ProfdSample.FD() }

// AddTarget makes the program count samples of process tgid (all its threads).
func (p *Program) AddTarget(tgid uint32) error {
	if err := p.objs.Targets.Update(tgid, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: add target %d: %w", tgid, err)
	}
	return nil
}

// RemoveTarget stops counting tgid. Counts already taken stay until drained. Removing a tgid
// that is not a target is not an error.
func (p *Program) RemoveTarget(tgid uint32) error {
	err := p.objs.Targets.Delete(tgid)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: remove target %d: %w", tgid, err)
	}
	return nil
}

// Stats sums the per-CPU counters.
func (p *Program) Stats() (Stats, error) {
	var s Stats
	dst := [statCount]*uint64{&s.Samples, &s.Outside, &s.Dropped, &s.Kernel}
	for i := uint32(0); i < statCount; i++ {
		var perCPU []uint64
		if err := p.objs.Stats.Lookup(i, &perCPU); err != nil {
			return Stats{}, fmt.Errorf("bpf: read stat %d: %w", i, err)
		}
		for _, v := range perCPU {
			*dst[i] += v
		}
	}
	return s, nil
}

// Close releases the program and every map. Perf events the program is attached to keep
// their own reference to it until they are closed.
func (p *Program) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.objs.Close(); err != nil {
		return fmt.Errorf("bpf: close: %w", err)
	}
	return nil
}
