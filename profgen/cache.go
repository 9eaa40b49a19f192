package profgen

import (
	"errors"
	"hash/maphash"
	"math"
	"sync"

	"github.com/profd/profd/profileio"
	"github.com/profd/profd/reestimate"
)

// RepairCache keeps each code object's repaired block counts from one conversion to the
// next: a flush of a cumulative profile repairs again only the functions whose samples
// changed since the last, where a JIT with thousands of sampled functions would have had
// every one repaired at every flush. An entry is the object's code and samples, the repair
// options and the count scale: any change of them misses. Sweep drops what the last
// conversions did not use, so the cache holds at most one profile's objects.
//
// A RepairCache is safe for concurrent use; give each output its own.
type RepairCache struct {
	mu      sync.Mutex
	seed    maphash.Seed
	entries map[repairKey]*repairEntry
	used    map[repairKey]bool // since the last Sweep
}

type repairKey struct {
	pid        uint32
	addr, size uint64
	code       uint64             // hash of the code bytes
	samples    uint64             // hash of the samples
	scale      uint64             // the count scale's bits
	repair     reestimate.Options // without its Solver, which solver names
	solver     string
}

type repairEntry struct {
	blocks []BlockCount
	entry  int
	calls  []directCall
	err    error
}

// NewRepairCache returns an empty cache.
func NewRepairCache() *RepairCache {
	return &RepairCache{seed: maphash.MakeSeed(), entries: map[repairKey]*repairEntry{}, used: map[repairKey]bool{}}
}

// Sweep drops the entries no conversion used since the last Sweep.
func (rc *RepairCache) Sweep() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for k := range rc.entries {
		if !rc.used[k] {
			delete(rc.entries, k)
		}
	}
	clear(rc.used)
}

// Len is the number of entries.
func (rc *RepairCache) Len() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.entries)
}

// repaired is repairedBlocks of o through the cache (nil: no cache); cached says it was
// found there. With late, o is not repaired anew: what the cache does not hold is
// errRepairLate.
func (rc *RepairCache) repaired(o *profileio.CaptureObject, opt reestimate.Options, scale float64, late bool) (blocks []BlockCount, entry int, calls []directCall, cached bool, err error) {
	var k repairKey
	if rc != nil {
		k = rc.key(o, opt, scale)
		rc.mu.Lock()
		e := rc.entries[k]
		rc.used[k] = true
		rc.mu.Unlock()
		if e != nil {
			return e.blocks, e.entry, e.calls, true, e.err
		}
	}
	if late {
		return nil, 0, nil, false, errRepairLate
	}
	blocks, entry, calls, err = repairedBlocks(o, opt, scale)
	if rc != nil {
		rc.mu.Lock()
		rc.entries[k] = &repairEntry{blocks: blocks, entry: entry, calls: calls, err: err}
		rc.mu.Unlock()
	}
	return blocks, entry, calls, false, err
}

// errRepairLate: the conversion's time for repairs (Options.RepairBy) had run out.
var errRepairLate = errors.New("profgen: no time left to repair")

func (rc *RepairCache) key(o *profileio.CaptureObject, opt reestimate.Options, scale float64) repairKey {
	var h maphash.Hash
	h.SetSeed(rc.seed)
	for _, s := range o.Samples {
		var b [16]byte
		for i := 0; i < 8; i++ {
			b[i], b[8+i] = byte(s.Offset>>(8*i)), byte(s.Count>>(8*i))
		}
		h.Write(b[:])
	}
	k := repairKey{pid: o.Pid, addr: o.Object.Addr, size: o.Object.Size, code: maphash.Bytes(rc.seed, o.Object.Code),
		samples: h.Sum64(), scale: math.Float64bits(scale), repair: opt}
	if opt.Solver != nil {
		k.solver, k.repair.Solver = opt.Solver.Name(), nil
	}
	return k
}
