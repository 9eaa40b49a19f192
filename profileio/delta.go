package profileio

import (
	"cmp"
	"hash/maphash"
	"slices"
)

// Baseline is what Delta subtracts: the counts of a capture and the identities they are
// counted under, without its code, line tables or names (those are hashed). Take it with
// NewBaseline; it is not changed after, and is safe to read concurrently.
type Baseline struct {
	seed     maphash.Seed
	objects  map[baseObjectKey][]OffsetCount
	native   map[baseNativeKey]uint64
	unmapped map[baseUnmappedKey]uint64
	unnamed  map[baseUnnamedKey]uint64
	// stacks are by the hash of a stack's whole key (stackKey); each keeps the hash of its
	// frames' addresses alone, under which a chain renamed since is found again.
	stacks map[uint64]stackBase
}

// baseObjectKey is a code object's identity: its map version where the capture has one (set
// in memory by the daemon, stable while later records add code or lines to the object),
// else its address, load time and name.
type baseObjectKey struct {
	pid     uint32
	version uint64
	addr    uint64
	loadNs  int64
	name    uint64 // hashed
}

type baseNativeKey struct {
	pid   uint32
	file  uint64 // hashed
	start uint64
	addr  uint64
}

type baseUnmappedKey struct {
	pid     uint32
	mapping uint64 // hashed
}

type baseUnnamedKey struct {
	pid     uint32
	ip      uint64
	firstNs int64
}

type stackBase struct {
	addrs uint64 // stackAddrKey
	count uint64
	pid   uint32
}

// Bytes estimates the memory the baseline holds: map entries and sampled offsets.
func (b *Baseline) Bytes() int64 {
	if b == nil {
		return 0
	}
	// Map entries cost about their key and value plus a third again (buckets, tophash).
	n := int64(len(b.objects)) * (64 + 24) * 4 / 3
	for _, s := range b.objects {
		n += int64(cap(s)) * 16
	}
	n += int64(len(b.native)) * (40 + 8) * 4 / 3
	n += int64(len(b.unmapped)) * (16 + 8) * 4 / 3
	n += int64(len(b.unnamed)) * (32 + 8) * 4 / 3
	n += int64(len(b.stacks)) * (8 + 24) * 4 / 3
	return n
}

// NewBaseline takes c's counts, to be subtracted from a later capture of the same
// processes (Delta). c's native and kernel frames should be named as they will be in the
// later capture: a frame named since is matched by its address only.
func NewBaseline(c *Capture) *Baseline {
	b := &Baseline{seed: maphash.MakeSeed(), objects: make(map[baseObjectKey][]OffsetCount, len(c.Objects)),
		native: map[baseNativeKey]uint64{}, unmapped: make(map[baseUnmappedKey]uint64, len(c.Unmapped)),
		unnamed: make(map[baseUnnamedKey]uint64, len(c.Unnamed)), stacks: make(map[uint64]stackBase, len(c.Stacks))}
	for _, o := range c.Objects {
		if len(o.Samples) == 0 {
			continue
		}
		k := b.baseObjectKey(o)
		b.objects[k] = addOffsetCounts(b.objects[k], o.Samples)
	}
	for _, m := range c.Native {
		for _, s := range m.Samples {
			b.native[b.baseNativeKey(m, s)] += s.Count
		}
	}
	for _, u := range c.Unmapped {
		b.unmapped[b.baseUnmappedKey(u)] += u.Count
	}
	for _, u := range c.Unnamed {
		b.unnamed[baseUnnamedKey{u.Pid, u.IP, u.FirstNs}] += u.Count
	}
	var scratch []byte
	for i := range c.Stacks {
		st := &c.Stacks[i]
		k := b.stackKey(c, st, &scratch)
		e := b.stacks[k]
		e.addrs, e.pid = b.stackAddrKey(st, &scratch), st.Pid
		e.count += st.Count
		b.stacks[k] = e
	}
	return b
}

// Delta returns the samples c holds beyond base: c is a later capture of the processes
// base was taken of (counts only grow), and Delta(c, NewBaseline(a)) merged with a gives
// c's counts. Everything but the counts is c's: its meta, end, processes and every object
// (code and line tables shared with c, those of objects with no samples in the delta and
// in none of its stacks left out, as a capture leaves out those of unsampled code).
// Entries whose count is 0 in the delta are dropped. Samples a later capture names that
// base had unnamed (a JIT's record came late) are taken from the object or the call chain
// now naming them, so that each sample is counted once; so are those base had in an object
// c no longer lists, whose code profd let go of and counts since under OverBudgetMapping or
// EndedMapping. A nil base subtracts nothing.
// c is not changed.
func Delta(c *Capture, base *Baseline) *Capture {
	if base == nil {
		base = &Baseline{seed: maphash.MakeSeed()}
	}
	out := &Capture{Version: c.Version, Meta: c.Meta, Processes: c.Processes, End: c.End,
		Truncated: c.Truncated, TruncatedAt: c.TruncatedAt}
	// Counts of base already taken from c's entries; entries of c that share a key (two
	// objects, or two stacks, alike) draw on one count.
	usedObj := map[baseObjectKey][]OffsetCount{}
	out.Objects = make([]*CaptureObject, len(c.Objects))
	for i, o := range c.Objects {
		co := *o
		co.Samples = nil
		if len(o.Samples) > 0 {
			k := base.baseObjectKey(o)
			left, ok := usedObj[k]
			if !ok {
				left = slices.Clone(base.objects[k])
			}
			co.Samples, left = subtractOffsetCounts(o.Samples, left)
			usedObj[k] = left
		}
		out.Objects[i] = &co
	}
	// Samples base had unnamed that c names: taken from the object now naming them.
	var ix *objectIndex
	for k, n := range base.unnamed {
		if named := n - min(n, c.unnamedCount(k)); named > 0 {
			if ix == nil {
				ix = newObjectIndex(out.Objects)
			}
			out.takeNamed(ix, k, named)
		}
	}
	usedNative := map[baseNativeKey]uint64{}
	for _, m := range c.Native {
		nm := *m
		nm.Samples = nil
		for _, s := range m.Samples {
			k := base.baseNativeKey(m, s)
			d := takeCount(s.Count, k, base.native, usedNative)
			if d > 0 {
				s.Count = d
				nm.Samples = append(nm.Samples, s)
			}
		}
		if len(nm.Samples) > 0 {
			out.Native = append(out.Native, &nm)
		}
	}
	// Samples base had in objects c no longer lists: profd let go of the objects (code that
	// ended) and counts their samples since under OverBudgetMapping or EndedMapping.
	listed := make(map[baseObjectKey]bool, len(c.Objects))
	for _, o := range c.Objects {
		listed[base.baseObjectKey(o)] = true
	}
	movedOut := map[uint32]uint64{}
	for k, samples := range base.objects {
		if !listed[k] {
			for _, s := range samples {
				movedOut[k.pid] += s.Count
			}
		}
	}
	usedUnmapped := map[baseUnmappedKey]uint64{}
	for _, u := range c.Unmapped {
		u.Count = takeCount(u.Count, base.baseUnmappedKey(u), base.unmapped, usedUnmapped)
		if u.Mapping == OverBudgetMapping || u.Mapping == EndedMapping {
			take := min(u.Count, movedOut[u.Pid])
			u.Count -= take
			movedOut[u.Pid] -= take
		}
		if u.Count > 0 {
			out.Unmapped = append(out.Unmapped, u)
		}
	}
	usedUnnamed := map[baseUnnamedKey]uint64{}
	for _, u := range c.Unnamed {
		if u.Count = takeCount(u.Count, baseUnnamedKey{u.Pid, u.IP, u.FirstNs}, base.unnamed, usedUnnamed); u.Count > 0 {
			out.Unnamed = append(out.Unnamed, u)
		}
	}
	out.Stacks = deltaStacks(c, base)
	dropUnframedCode(out)
	return out
}

// deltaStacks is c's stacks less base's: by their whole key first, then what base counted
// under chains renamed since (a frame named late) by their frames' addresses, then what is
// left of a process's from its chains that profd let go of in part (letGoFrame).
func deltaStacks(c *Capture, base *Baseline) []StackSample {
	if c.Stacks == nil {
		return nil
	}
	counts := make([]uint64, len(c.Stacks))
	addrs := make([]uint64, len(c.Stacks))
	used := map[uint64]uint64{}
	var scratch []byte
	for i := range c.Stacks {
		st := &c.Stacks[i]
		k := base.stackKey(c, st, &scratch)
		addrs[i] = base.stackAddrKey(st, &scratch)
		e := base.stacks[k]
		take := min(st.Count, e.count-used[k])
		used[k] += take
		counts[i] = st.Count - take
	}
	type pidAddrs struct {
		pid   uint32
		addrs uint64
	}
	renamed := map[pidAddrs]uint64{}
	for k, e := range base.stacks {
		if left := e.count - used[k]; left > 0 {
			renamed[pidAddrs{e.pid, e.addrs}] += left
		}
	}
	for i := range c.Stacks {
		k := pidAddrs{c.Stacks[i].Pid, addrs[i]}
		if n := renamed[k]; n > 0 && counts[i] > 0 {
			take := min(n, counts[i])
			counts[i] -= take
			renamed[k] = n - take
		}
	}
	letGo := map[uint32]uint64{}
	for k, n := range renamed {
		letGo[k.pid] += n
	}
	for i := range c.Stacks {
		st := &c.Stacks[i]
		if n := letGo[st.Pid]; n > 0 && counts[i] > 0 && slices.ContainsFunc(st.Frames, letGoFrame) {
			take := min(n, counts[i])
			counts[i] -= take
			letGo[st.Pid] = n - take
		}
	}
	out := []StackSample{}
	for i, st := range c.Stacks {
		if counts[i] > 0 {
			st.Count = counts[i]
			out = append(out, st)
		}
	}
	return out
}

// letGoFrame reports whether f stands, at no address, for what profd let go of in a chain:
// frames in code that ended (EndedMapping), so that such chains merge, or callers
// (CallersLetGoMapping).
func letGoFrame(f Frame) bool {
	return f.Mapping == EndedMapping || CallersLetGoMapping(f.Mapping)
}

// CallersLetGoMapping reports whether a chain's frame in mapping stands for the callers
// profd let go of, under the chain's leaf: CallersNotKeptMapping (a chain past a bound) or
// CallersInIntervalsMapping (a chain not sampled lately).
func CallersLetGoMapping(mapping string) bool {
	return mapping == CallersNotKeptMapping || mapping == CallersInIntervalsMapping
}

// takeCount is count less what is left of base[k] (used[k] of it taken already), noting
// what it takes.
func takeCount[K comparable](count uint64, k K, base, used map[K]uint64) uint64 {
	take := min(count, base[k]-used[k])
	used[k] += take
	return count - take
}

// unnamedCount is c's unnamed samples under k.
func (c *Capture) unnamedCount(k baseUnnamedKey) uint64 {
	var n uint64
	i, _ := slices.BinarySearchFunc(c.Unnamed, k, func(u UnnamedCount, k baseUnnamedKey) int {
		return cmp.Or(cmp.Compare(u.Pid, k.pid), cmp.Compare(u.IP, k.ip), cmp.Compare(u.FirstNs, k.firstNs))
	})
	for ; i < len(c.Unnamed) && c.Unnamed[i].Pid == k.pid && c.Unnamed[i].IP == k.ip && c.Unnamed[i].FirstNs == k.firstNs; i++ {
		n += c.Unnamed[i].Count
	}
	return n
}

// takeNamed takes up to n samples at k's address from the delta of the object of k's
// process that holds it at k's time (ix indexes c's objects): samples counted unnamed
// before, named since.
func (c *Capture) takeNamed(ix *objectIndex, k baseUnnamedKey, n uint64) {
	ix.holding(k.pid, k.ip, func(o *CaptureObject) bool {
		if o.Object.LoadNs > k.firstNs || o.Object.UnloadNs != 0 && o.Object.UnloadNs <= k.firstNs {
			return true
		}
		off := k.ip - o.Object.Addr
		i, found := slices.BinarySearchFunc(o.Samples, off, func(s OffsetCount, off uint64) int { return cmp.Compare(s.Offset, off) })
		if !found {
			return true
		}
		take := min(n, o.Samples[i].Count)
		o.Samples[i].Count -= take
		if o.Samples[i].Count == 0 {
			o.Samples = slices.Delete(o.Samples, i, i+1)
		}
		n -= take
		return n > 0
	})
}

// objectIndex finds the objects of a capture whose range holds an address.
type objectIndex struct {
	objs []*CaptureObject // by pid, then address
	// maxEnd[i] is the highest end (address + size) of objs[i]'s process's objects up to i.
	maxEnd []uint64
}

func newObjectIndex(objs []*CaptureObject) *objectIndex {
	s := slices.Clone(objs)
	slices.SortStableFunc(s, func(a, b *CaptureObject) int {
		return cmp.Or(cmp.Compare(a.Pid, b.Pid), cmp.Compare(a.Object.Addr, b.Object.Addr))
	})
	ix := &objectIndex{objs: s, maxEnd: make([]uint64, len(s))}
	for i, o := range s {
		end := o.Object.Addr + o.Object.Size
		if i > 0 && s[i-1].Pid == o.Pid {
			end = max(end, ix.maxEnd[i-1])
		}
		ix.maxEnd[i] = end
	}
	return ix
}

// holding calls f with each object of pid whose range holds ip, highest address first,
// until f returns false.
func (ix *objectIndex) holding(pid uint32, ip uint64, f func(*CaptureObject) bool) {
	// The first object past ip: every one before it starts at or below ip.
	i, _ := slices.BinarySearchFunc(ix.objs, ip, func(o *CaptureObject, ip uint64) int {
		if o.Pid != pid {
			return cmp.Compare(o.Pid, pid)
		}
		if o.Object.Addr <= ip {
			return -1
		}
		return 1
	})
	for j := i - 1; j >= 0 && ix.objs[j].Pid == pid && ix.maxEnd[j] > ip; j-- {
		if ix.objs[j].Object.Contains(ip) && !f(ix.objs[j]) {
			return
		}
	}
}

// dropUnframedCode leaves out the code and line tables of c's objects with no samples that
// are in none of its stacks (c's objects are its own copies).
func dropUnframedCode(c *Capture) {
	framed := make([]bool, len(c.Objects))
	for i := range c.Stacks {
		for _, f := range c.Stacks[i].Frames {
			if f.JIT() && int(f.Object) < len(framed) {
				framed[f.Object] = true
			}
		}
	}
	for i, o := range c.Objects {
		if len(o.Samples) == 0 && !framed[i] {
			o.Object.Code, o.Object.Lines = nil, nil
		}
	}
}

// addOffsetCounts adds b's counts to a's (both ascending by offset).
func addOffsetCounts(a, b []OffsetCount) []OffsetCount {
	out := make([]OffsetCount, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Offset < b[j].Offset:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Offset < a[i].Offset:
			out = append(out, b[j])
			j++
		default:
			out = append(out, OffsetCount{a[i].Offset, a[i].Count + b[j].Count})
			i++
			j++
		}
	}
	return out
}

// subtractOffsetCounts returns c less base (both ascending by offset), without its zero
// counts, and what is left of base.
func subtractOffsetCounts(c, base []OffsetCount) (delta, left []OffsetCount) {
	j := 0
	for _, s := range c {
		for j < len(base) && base[j].Offset < s.Offset {
			j++
		}
		if j < len(base) && base[j].Offset == s.Offset {
			take := min(s.Count, base[j].Count)
			base[j].Count -= take
			s.Count -= take
		}
		if s.Count > 0 {
			delta = append(delta, s)
		}
	}
	return delta, base
}

func (b *Baseline) hash(s string) uint64 { return maphash.String(b.seed, s) }

func (b *Baseline) baseObjectKey(o *CaptureObject) baseObjectKey {
	if o.Object.Version != 0 {
		return baseObjectKey{pid: o.Pid, version: o.Object.Version}
	}
	return baseObjectKey{pid: o.Pid, addr: o.Object.Addr, loadNs: o.Object.LoadNs, name: b.hash(o.Object.Name)}
}

func (b *Baseline) baseNativeKey(m *NativeMapping, s NativeSample) baseNativeKey {
	return baseNativeKey{pid: m.Pid, file: b.hash(m.File), start: m.Start, addr: s.Address}
}

func (b *Baseline) baseUnmappedKey(u UnmappedCount) baseUnmappedKey {
	return baseUnmappedKey{pid: u.Pid, mapping: b.hash(u.Mapping)}
}

// stackKey hashes st's whole key: its thread, whether it is cut, and each frame, a JIT
// frame by its object's identity, offset and address, another by its address, function
// and mapping.
func (b *Baseline) stackKey(c *Capture, st *StackSample, scratch *[]byte) uint64 {
	buf := appendUvarint((*scratch)[:0], uint64(st.Pid))
	buf = appendUvarint(buf, uint64(st.Tid))
	if st.Cut {
		buf = append(buf, 1)
	} else {
		buf = append(buf, 0)
	}
	buf = appendString(buf, st.Comm)
	for _, f := range st.Frames {
		if f.JIT() && int(f.Object) < len(c.Objects) {
			k := b.baseObjectKey(c.Objects[f.Object])
			buf = append(buf, 1)
			buf = appendUvarint(buf, uint64(k.pid))
			buf = appendUvarint(buf, k.version)
			buf = appendUvarint(buf, k.addr)
			buf = appendUvarint(buf, uint64(k.loadNs))
			buf = appendUvarint(buf, k.name)
			buf = appendUvarint(buf, f.Offset)
			buf = appendUvarint(buf, f.Address)
			continue
		}
		buf = append(buf, 0)
		buf = appendUvarint(buf, f.Address)
		buf = appendString(buf, f.Function)
		buf = appendString(buf, f.Mapping)
	}
	*scratch = buf
	return maphash.Bytes(b.seed, buf)
}

// stackAddrKey hashes st's thread and its frames' addresses: what stays of a chain when
// its frames are named late.
func (b *Baseline) stackAddrKey(st *StackSample, scratch *[]byte) uint64 {
	buf := appendUvarint((*scratch)[:0], uint64(st.Pid))
	buf = appendUvarint(buf, uint64(st.Tid))
	buf = appendString(buf, st.Comm)
	for _, f := range st.Frames {
		buf = appendUvarint(buf, f.Address)
	}
	*scratch = buf
	return maphash.Bytes(b.seed, buf)
}
