package bpf

import (
	"errors"
	"fmt"
	"runtime"
	"structs"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
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
	mu        sync.Mutex // serialises Drain and Close
	objs      profileObjects
	countSpec *ebpf.MapSpec // for fresh counts maps
	current   *ebpf.Map     // the counts map in slot 0 of objs.Counts
	spare     *ebpf.Map     // an empty counts map for the next Drain, or nil
	closed    bool
	batch     drainBuffers
}

// sampleKey is profile.c's struct sample_key.
type sampleKey struct {
	_    structs.HostLayout
	Tgid uint32
	_    uint32
	IP   uint64
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
	inner := spec.Maps[profileMapCounts].InnerMap
	inner.MaxEntries = entries
	p := &Program{countSpec: inner}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		// Kernels before bpf_mem_alloc refuse non-preallocated hash maps in perf_event
		// programs; preallocated ones work everywhere but cost time to create.
		inner.Flags &^= unix.BPF_F_NO_PREALLOC
		if err2 := spec.LoadAndAssign(&p.objs, nil); err2 != nil {
			return nil, fmt.Errorf("bpf: load program: %w: %w", ErrNotSupported, err)
		}
	}
	m, err := ebpf.NewMap(p.countSpec)
	if err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("bpf: create counts map: %w", err)
	}
	if err := p.install(m); err != nil {
		m.Close()
		p.objs.Close()
		return nil, err
	}
	p.current = m
	return p, nil
}

// install makes the program count into m.
func (p *Program) install(m *ebpf.Map) error {
	if err := p.objs.Counts.Update(uint32(0), m, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: install counts map: %w", err)
	}
	return nil
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
	err := p.current.Close()
	if p.spare != nil {
		p.spare.Close()
	}
	if err2 := p.objs.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("bpf: close: %w", err)
	}
	return nil
}
