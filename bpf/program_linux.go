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
	// MaxEntries caps the distinct keys counted between two drains; 0 means
	// DefaultMaxEntries. From minShardedEntries on, the keys are split by a hash between
	// two maps of MaxEntries/2 keys each (so a very skewed set of keys can find its half
	// full a little earlier). Samples of a new key that find the map full are dropped and
	// counted (Stats.Dropped).
	MaxEntries uint32
}

// defaultIteratorMinKeys is how many keys a shard's last drain must have found for the next
// to read it with the map-element iterator; smaller maps are read with batch lookups.
// Measured on 6.18 (BenchmarkDaemonCPU at ~100 keys a drain): 50 cpu-ms per 1000 samples
// with the iterator on every drain against 9 with batch lookups; on 50k keys a shard
// (BenchmarkDrain100k) the iterator drains in 37 ms against 42.
const defaultIteratorMinKeys = 8192

// countShards is the number of slots in the counts array of maps (profile.c's
// COUNT_SHARDS).
const countShards = 2

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
}

// Stat slots, as in profile.c's enum stat_index.
const (
	statSamples = iota
	statOutside
	statDropped
	statKernel
	statCount
)

// samplingObjects are the maps and the sampling program. The dump iterator is loaded
// apart: it needs the kernel's BTF, sampling does not.
type samplingObjects struct {
	profileMaps
	ProfdSample *ebpf.Program `ebpf:"profd_sample"`
}

func (o *samplingObjects) Close() error {
	err := o.ProfdSample.Close()
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
	mu      sync.Mutex // serialises Drain and Close
	objs    samplingObjects
	dump    *ebpf.Program // the map-element iterator, nil when it does not load
	dumpErr error         // why dump is nil
	method  drainMethod
	// iteratorMinKeys: a shard is read with the iterator only after a drain that found at
	// least this many keys in it (defaultIteratorMinKeys; tests set 0 to force it).
	iteratorMinKeys int
	countSpec       *ebpf.MapSpec // for fresh counts maps
	// current holds the distinct counts maps in objs.Counts: one per slot, or one in every
	// slot. spare holds, per shard, an empty map for the next Drain, or nil.
	current, spare []*ebpf.Map
	closed         bool
	readers        []shardReader // per shard
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
	shards := 1
	if entries >= minShardedEntries {
		shards = countShards
	}
	inner := spec.Maps[profileMapCounts].InnerMap
	inner.MaxEntries = (entries + uint32(shards) - 1) / uint32(shards)
	p := &Program{countSpec: inner, spare: make([]*ebpf.Map, shards), readers: make([]shardReader, shards)}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		// Kernels before bpf_mem_alloc refuse non-preallocated hash maps in perf_event
		// programs; preallocated ones work everywhere but cost time to create.
		inner.Flags &^= unix.BPF_F_NO_PREALLOC
		if err2 := spec.LoadAndAssign(&p.objs, nil); err2 != nil {
			return nil, fmt.Errorf("bpf: load program: %w: %w", ErrNotSupported, err)
		}
	}
	maps, err := p.newMaps()
	if err == nil {
		err = p.install(maps)
	}
	if err != nil {
		closeMaps(maps)
		p.objs.Close()
		return nil, err
	}
	p.current = maps
	p.iteratorMinKeys = defaultIteratorMinKeys
	p.method = drainBatch
	if p.dump, err = ebpf.NewProgram(spec.Programs[profileProgProfdDump]); err == nil {
		p.method = drainIterator
	} else {
		p.dumpErr = fmt.Errorf("bpf: load map iterator: %w", err)
	}
	return p, nil
}

// newMaps returns a counts map per shard: the spares, else new ones.
func (p *Program) newMaps() ([]*ebpf.Map, error) {
	maps := make([]*ebpf.Map, len(p.spare))
	for s := range maps {
		maps[s], p.spare[s] = p.spare[s], nil
		if maps[s] != nil {
			continue
		}
		m, err := ebpf.NewMap(p.countSpec)
		if err != nil {
			closeMaps(maps)
			return nil, fmt.Errorf("bpf: create counts map: %w", err)
		}
		maps[s] = m
	}
	return maps, nil
}

func closeMaps(maps []*ebpf.Map) {
	for _, m := range maps {
		if m != nil {
			m.Close()
		}
	}
}

// install makes the program count into maps, slot s into maps[s % len(maps)]. All slots
// change in one batch update, which returns after one RCU grace period (measured on Linux
// 6.18: a two-slot batch takes as long as one update); where the kernel has no batch update
// of an array of maps, slot by slot, one grace period each.
func (p *Program) install(maps []*ebpf.Map) error {
	var slots, fds [countShards]uint32
	for s := range slots {
		slots[s], fds[s] = uint32(s), uint32(maps[s%len(maps)].FD())
	}
	_, err := p.objs.Counts.BatchUpdate(slots[:], fds[:], nil)
	if errors.Is(err, ebpf.ErrNotSupported) {
		err = nil
		for s := 0; s < countShards && err == nil; s++ {
			err = p.objs.Counts.Update(uint32(s), maps[s%len(maps)], ebpf.UpdateAny)
		}
	}
	if err != nil {
		return fmt.Errorf("bpf: install counts maps: %w", err)
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
	closeMaps(p.current)
	closeMaps(p.spare)
	if p.dump != nil {
		p.dump.Close()
	}
	err := p.objs.Close()
	if err != nil {
		return fmt.Errorf("bpf: close: %w", err)
	}
	return nil
}
