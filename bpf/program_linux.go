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

// Config configures Load: the program and maps a Program owns until Close.
type Config struct {
	// MaxEntries caps the distinct keys counted between two drains; 0 means
	// DefaultMaxEntries. From minShardedEntries on, the keys are split by a hash between
	// two shards of MaxEntries/2 keys each (so a very skewed set of keys can find its half
	// full a little earlier). Samples of a new key that find the shard full are dropped and
	// counted (Stats.Dropped). A shard's capacity is split between a map sized to the keys
	// of recent drains and an overflow map for the rest (see Drain).
	MaxEntries uint32
	// Stacks attaches the program that counts each sample by thread and call chain
	// (DrainStacks) instead of by (tgid, ip) (Drain, which then finds nothing).
	Stacks bool
	// KernelStacks: with Stacks, samples taken in kernel mode are counted with their kernel
	// frames and their user chain; without, they only count in Stats.Kernel.
	KernelStacks bool
	// AllBut, when not 0, counts the user-mode samples of every process but tgid AllBut
	// (profd's own), targets or not; kernel-mode samples only count for targets. AllUIDs,
	// when given, narrows it to the processes whose real user is one of them (at most
	// MaxAllUIDs); AllCgroups to the processes in, or below, the cgroup v2 directories
	// SetCgroups names (none until it is called).
	AllBut     uint32
	AllUIDs    []uint32
	AllCgroups bool
}

// countShards is the number of shards (profile.c's COUNT_SHARDS); the counts array of maps
// has a slot per shard and then one per shard's overflow map.
const countShards = 2

// minPrimaryEntries is the smallest size of a shard's primary map. A drain reads every
// bucket of the maps it reads, so each shard's primary map is sized to twice the keys its
// last drain found, between this and the shard's capacity; keys beyond it go to the
// overflow map, which is read only when it was used.
const minPrimaryEntries = 1024

// minShardedEntries: below this MaxEntries, one counts map sits in both slots; reading
// two small maps in parallel gains nothing.
const minShardedEntries = 8192

// shardOf is profile.c's shard_of: the slot of counts that k is counted in.
func shardOf(k sampleKey) int {
	return int(((k.IP ^ uint64(k.Tgid)<<32) * 0x9E3779B97F4A7C15) >> 63)
}

// Stats are the program's counters, summed over CPUs, since Load.
type Stats struct {
	Samples uint64 // target samples counted into a map
	Outside uint64 // samples of processes that are not targets
	Dropped uint64 // target samples lost because the counts map was full
	Kernel  uint64 // target samples taken in kernel mode (not attributed to an address)
	// Overflow counts target samples that found their shard's primary map full and went
	// to its overflow map (they are also in Samples, or in Dropped when that was full too).
	Overflow uint64
}

// Stat slots, as in profile.c's enum stat_index.
const (
	statSamples = iota
	statOutside
	statDropped
	statKernel
	statOverflow
	statCount
)

// samplingObjects are the maps and the sampling program. The dump iterator is loaded
// apart: it needs the kernel's BTF, sampling does not.
type samplingObjects struct {
	profileMaps
	ProfdSample       *ebpf.Program `ebpf:"profd_sample"`
	ProfdSampleStacks *ebpf.Program `ebpf:"profd_sample_stacks"`
}

func (o *samplingObjects) Close() error {
	err := errors.Join(o.ProfdSample.Close(), o.ProfdSampleStacks.Close())
	if err2 := o.profileMaps.Close(); err == nil {
		err = err2
	}
	return err
}

// drainMethod is how Drain reads a counts map.
type drainMethod int

const (
	drainIterator drainMethod = iota // profd_dump, a map-element iterator (Linux 5.9, kernel BTF)
	drainBatch                       // BPF_MAP_LOOKUP_BATCH (Linux 5.6)
	drainOneByOne                    // BPF_MAP_GET_NEXT_KEY and a lookup per key
)

// Program is the loaded sampling program and its maps.
type Program struct {
	mu        sync.Mutex // serialises Drain and Close
	objs      samplingObjects
	dump      *ebpf.Program // the map-element iterator, nil when it does not load
	dumpErr   error         // why dump is nil
	method    drainMethod
	countSpec *ebpf.MapSpec // for fresh counts maps
	// current holds the shards' primary maps in objs.Counts (one per shard slot, or one in
	// every shard slot), currentOverflow their overflow maps (a shard's primary map itself
	// when that has the shard's whole capacity). spare and spareOverflow hold, per shard,
	// an empty map for the next Drain, or nil.
	current, currentOverflow []*ebpf.Map
	spare, spareOverflow     []*ebpf.Map
	// shardEntries is each shard's capacity; primaryEntries the size of the next primary
	// map made for each shard, which follows the keys drains find when adaptive (maps that
	// are not preallocated; a preallocated map costs its capacity to create, so those keep
	// the whole capacity).
	shardEntries   uint32
	primaryEntries []uint32
	adaptive       bool
	// overflowsBefore is Stats.Overflow read just before the last install: the maps
	// installed then took overflow samples only if the counter has moved since.
	overflowsBefore uint64
	closed          bool
	readers         []shardReader // per shard's primary map, then per overflow map

	// stacks: profd_sample_stacks is the program to attach; it counts into stackMap, made
	// from stackSpec and replaced at each DrainStacks by stackSpare (the map the drain
	// before emptied) or a new one, read through stackKeys and stackVals.
	stacks     bool
	stackSpec  *ebpf.MapSpec
	stackMap   *ebpf.Map
	stackSpare *ebpf.Map
	stackKeys  []profileStackKey
	stackVals  []Count
}

// sampleKey is profile.c's struct sample_key.
type sampleKey struct {
	_    structs.HostLayout
	Tgid uint32
	_    uint32
	IP   uint64
}

// Count is one key's samples since the previous drain (profile.c's struct sample_value):
// how many, and the CLOCK_MONOTONIC times of the first and the last.
type Count struct {
	_       structs.HostLayout
	N       uint64
	FirstNs uint64
	LastNs  uint64
}

// Load loads the program and creates its maps. The caller attaches FD() to perf events and
// must Close the Program.
func Load(cfg Config) (*Program, error) {
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("%w: program reads x86-64 registers, this is %s", ErrNotSupported, runtime.GOARCH)
	}
	spec, err := loadProfile()
	if err != nil {
		return nil, fmt.Errorf("bpf: load spec: %w", err)
	}
	entries := cfg.MaxEntries
	if entries == 0 {
		entries = DefaultMaxEntries
	}
	shards := 1
	if entries >= minShardedEntries {
		shards = countShards
	}
	inner := spec.Maps[profileMapCounts].InnerMap
	// The kernel does not compare a hash map's max_entries with the inner map template's, so
	// every inner map can have its own size.
	inner.MaxEntries = (entries + uint32(shards) - 1) / uint32(shards)
	if cfg.KernelStacks {
		if err := spec.Variables[profileVarKernelStacks].Set(uint8(1)); err != nil {
			return nil, fmt.Errorf("bpf: set kernel_stacks: %w", err)
		}
	}
	if err := setAllBut(spec, cfg.AllBut, cfg.AllUIDs, cfg.AllCgroups); err != nil {
		return nil, err
	}
	stackInner := spec.Maps[profileMapStackCounts].InnerMap
	stackInner.MaxEntries = DefaultStackEntries
	p := &Program{countSpec: inner, shardEntries: inner.MaxEntries, adaptive: true, stacks: cfg.Stacks, stackSpec: stackInner,
		spare: make([]*ebpf.Map, shards), spareOverflow: make([]*ebpf.Map, shards),
		primaryEntries: make([]uint32, shards), readers: make([]shardReader, 2*shards)}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		// Kernels before bpf_mem_alloc refuse non-preallocated hash maps in perf_event
		// programs; preallocated ones work everywhere but cost time to create.
		inner.Flags &^= unix.BPF_F_NO_PREALLOC
		// A preallocated stack map costs its capacity in keys of 1.5 KiB each.
		stackInner.Flags &^= unix.BPF_F_NO_PREALLOC
		stackInner.MaxEntries = DefaultStackEntries / 16
		p.adaptive = false
		if err2 := spec.LoadAndAssign(&p.objs, nil); err2 != nil {
			return nil, fmt.Errorf("bpf: load program: %w: %w", ErrNotSupported, err)
		}
	}
	if err := fillUIDs(p.objs.AllUids, cfg.AllUIDs); err != nil {
		p.objs.Close()
		return nil, err
	}
	for s := range p.primaryEntries {
		p.primaryEntries[s] = p.shardEntries
		if p.adaptive {
			p.primaryEntries[s] = min(minPrimaryEntries, p.shardEntries)
		}
	}
	maps, overflows, err := p.newMaps()
	if err == nil {
		err = p.install(maps, overflows)
	}
	if err == nil && p.stacks {
		_, err = p.newStackMap()
	}
	if err != nil {
		closeMaps(maps)
		closeMaps(overflows)
		p.objs.Close()
		return nil, err
	}
	p.current, p.currentOverflow = maps, overflows
	p.method = drainBatch
	if p.dump, err = ebpf.NewProgram(spec.Programs[profileProgProfdDump]); err == nil {
		p.method = drainIterator
	} else {
		p.dumpErr = fmt.Errorf("bpf: load map iterator: %w", err)
	}
	return p, nil
}

// newMaps returns a primary and an overflow map per shard, sized by primaryEntries: the
// spares where they have the size, else new ones. A shard whose primary map has its whole
// capacity gets that map as its overflow map.
func (p *Program) newMaps() (maps, overflows []*ebpf.Map, err error) {
	maps, overflows = make([]*ebpf.Map, len(p.spare)), make([]*ebpf.Map, len(p.spare))
	for s := range maps {
		want := p.primaryEntries[s]
		if maps[s], err = p.takeSpare(&p.spare[s], want); err == nil && want < p.shardEntries {
			overflows[s], err = p.takeSpare(&p.spareOverflow[s], p.shardEntries-want)
		}
		if err != nil {
			closeMaps(maps)
			closeMaps(overflows)
			return nil, nil, err
		}
		if overflows[s] == nil {
			overflows[s] = maps[s]
		}
		if p.spareOverflow[s] != nil { // a shard that no longer needs an overflow map
			p.spareOverflow[s].Close()
			p.spareOverflow[s] = nil
		}
	}
	return maps, overflows, nil
}

// takeSpare returns *spare when it holds entries keys, else a new map of that size (closing
// the spare).
func (p *Program) takeSpare(spare **ebpf.Map, entries uint32) (*ebpf.Map, error) {
	m := *spare
	*spare = nil
	if m != nil && m.MaxEntries() == entries {
		return m, nil
	}
	if m != nil {
		m.Close()
	}
	spec := p.countSpec.Copy()
	spec.MaxEntries = entries
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, fmt.Errorf("bpf: create counts map of %d entries: %w", entries, err)
	}
	return m, nil
}

func closeMaps(maps []*ebpf.Map) {
	for _, m := range maps {
		if m != nil {
			m.Close()
		}
	}
}

// install makes the program count into maps, slot s into maps[s % len(maps)], and overflow
// into overflows, slot countShards+s into overflows[s % len(overflows)]. All slots change in
// one batch update, which returns after one RCU grace period; where the kernel has no batch
// update of an array of maps, slot by slot, one grace period each.
func (p *Program) install(maps, overflows []*ebpf.Map) error {
	var slots, fds [2 * countShards]uint32
	for s := range countShards {
		slots[s], fds[s] = uint32(s), uint32(maps[s%len(maps)].FD())
		o := countShards + s
		slots[o], fds[o] = uint32(o), uint32(overflows[s%len(overflows)].FD())
	}
	_, err := p.objs.Counts.BatchUpdate(slots[:], fds[:], nil)
	if errors.Is(err, ebpf.ErrNotSupported) {
		err = nil
		for i := 0; i < len(slots) && err == nil; i++ {
			err = p.objs.Counts.Update(slots[i], fds[i], ebpf.UpdateAny)
		}
	}
	if err != nil {
		return fmt.Errorf("bpf: install counts maps: %w", err)
	}
	return nil
}

// FD is the program's file descriptor, for PERF_EVENT_IOC_SET_BPF. It stays valid until Close.
func (p *Program) FD() int {
	if p.stacks {
		return p.objs.ProfdSampleStacks.FD()
	}
	return p.objs.ProfdSample.FD()
}

// AddTarget makes the program count samples of process tgid (all its threads).
func (p *Program) AddTarget(tgid uint32) error { return addTarget(p.objs.Targets, tgid) }

// addTarget puts tgid in a program's targets map.
func addTarget(targets *ebpf.Map, tgid uint32) error {
	if err := targets.Update(tgid, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: add target %d: %w", tgid, err)
	}
	return nil
}

// SetCgroups makes ids, the ids of cgroup v2 directories (their inode numbers), the
// cgroups whose processes Config.AllCgroups counts, in place of those of the last call.
func (p *Program) SetCgroups(ids []uint64) error { return setCgroups(p.objs.AllCgroups, ids) }

// RemoveTarget stops counting tgid, and forgets its text range (SetGoText, SetJITText).
// Counts already taken stay until drained. Removing a tgid that is not a target is not an
// error.
func (p *Program) RemoveTarget(tgid uint32) error {
	return errors.Join(removeTarget(p.objs.Targets, tgid), p.ForgetText(tgid))
}

// IsTarget reports whether tgid is a target (AddTarget, and no RemoveTarget since).
func (p *Program) IsTarget(tgid uint32) bool {
	var v uint8
	return p.objs.Targets.Lookup(tgid, &v) == nil
}

// ForgetText undoes SetGoText and SetJITText; not an error for a tgid it was not given.
func (p *Program) ForgetText(tgid uint32) error {
	err := p.objs.TextRanges.Delete(tgid)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: forget text range of %d: %w", tgid, err)
	}
	return nil
}

// textRange is profile.c's struct text_range.
type textRange struct {
	_      structs.HostLayout
	Lo, Hi uint64
	JIT    uint32
	_      uint32
}

// SetGoText tells the stacks program that process tgid runs a Go executable whose code
// lies in [lo, hi): a sample there whose word at the stack pointer lies there too keeps
// that word (Stack.Words), the return address the kernel's walk skips where the function
// has no frame. A process has one range, Go's or its JIT code's (SetJITText); at most
// MaxTextRanges processes have one at once; past that, an error.
func (p *Program) SetGoText(tgid uint32, lo, hi uint64) error {
	return p.setText(tgid, textRange{Lo: lo, Hi: hi})
}

// SetJITText tells the stacks program that process tgid's JIT code lies in [lo, hi): a
// sample there keeps as possible return addresses the words at the stack pointer that lie
// there too, besides those that follow a call, as a JIT may enter its code with a return
// address it pushed and a jump (HotSpot's interpreter does).
func (p *Program) SetJITText(tgid uint32, lo, hi uint64) error {
	return p.setText(tgid, textRange{Lo: lo, Hi: hi, JIT: 1})
}

func (p *Program) setText(tgid uint32, r textRange) error {
	if err := p.objs.TextRanges.Update(tgid, r, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bpf: set text range of %d: %w", tgid, err)
	}
	return nil
}

// removeTarget takes tgid out of a program's targets map; not an error for a tgid that is
// not there.
func removeTarget(targets *ebpf.Map, tgid uint32) error {
	err := targets.Delete(tgid)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpf: remove target %d: %w", tgid, err)
	}
	return nil
}

// Stats sums the per-CPU counters.
func (p *Program) Stats() (Stats, error) {
	var s Stats
	dst := [statCount]*uint64{&s.Samples, &s.Outside, &s.Dropped, &s.Kernel, &s.Overflow}
	for i := uint32(0); i < statCount; i++ {
		v, err := p.stat(i)
		if err != nil {
			return Stats{}, err
		}
		*dst[i] = v
	}
	return s, nil
}

// stat sums one counter over the CPUs.
func (p *Program) stat(i uint32) (uint64, error) { return sumStat(p.objs.Stats, i) }

// sumStat sums counter i of a program's per-CPU stats map over the CPUs.
func sumStat(stats *ebpf.Map, i uint32) (uint64, error) {
	var perCPU []uint64
	if err := stats.Lookup(i, &perCPU); err != nil {
		return 0, fmt.Errorf("bpf: read stat %d: %w", i, err)
	}
	var sum uint64
	for _, v := range perCPU {
		sum += v
	}
	return sum, nil
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
	closeMaps(p.current)
	closeMaps(p.currentOverflow)
	closeMaps(p.spare)
	closeMaps(p.spareOverflow)
	for _, m := range []*ebpf.Map{p.stackMap, p.stackSpare} {
		if m != nil {
			m.Close()
		}
	}
	if p.dump != nil {
		p.dump.Close()
	}
	err := p.objs.Close()
	if err != nil {
		return fmt.Errorf("bpf: close: %w", err)
	}
	return nil
}
