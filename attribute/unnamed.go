package attribute

import (
	"cmp"
	"math"
	"slices"

	"github.com/profd/profd/profileio"
)

// maxUnnamedEntries bounds the unnamed sample counts kept per process (16 bytes each);
// beyond it, further unnamed samples are counted as outside JIT code and dropped.
const maxUnnamedEntries = 1 << 20

// unnamedEntryBytes is what an entry of the unnamed samples takes (Counts.LimitUnnamed).
const unnamedEntryBytes = 16

// unnamedSamples holds a process's samples in JIT memory that no code object named yet:
// the JIT's record of their code may come later (a perf map written at exit, a jitdump file
// found late, a FIFO record still in flight). Each entry keeps the address, how many
// samples and when they were taken, 16 bytes in all, in chunks of one drain each so that
// times fit 32 bits of microseconds after the chunk's base. Not safe for concurrent use.
type unnamedSamples struct {
	chunks  []unnamedChunk
	entries int
	samples uint64
	dropped uint64 // samples not kept: over maxUnnamedEntries
}

type unnamedChunk struct {
	baseNs  int64
	lastNs  int64 // no entry's samples were taken after it
	entries []unnamedEntry
	// shown: a capture listed its entries unnamed (list), so an interval's baseline may
	// hold them so.
	shown bool
	// sealed: its entries are sorted by address (seal).
	sealed bool
}

// unnamedEntry is count samples at ip taken from baseNs+firstUs µs to spanMs ms later.
type unnamedEntry struct {
	ip      uint64
	firstUs uint32
	spanMs  uint16
	count   uint16
}

func (e *unnamedEntry) times(baseNs int64) (first, last int64) {
	first = baseNs + int64(e.firstUs)*1000
	return first, first + int64(e.spanMs)*1e6
}

// begin starts the chunk of one drain whose samples were all taken at or after baseNs.
func (u *unnamedSamples) begin(baseNs int64) {
	if n := len(u.chunks); n > 0 && len(u.chunks[n-1].entries) == 0 {
		u.chunks[n-1] = unnamedChunk{baseNs: baseNs}
		return
	}
	u.chunks = append(u.chunks, unnamedChunk{baseNs: baseNs})
}

// add keeps n samples at ip taken from first to last, in the current chunk, each entry
// taken from all too (every process's entries). It reports false when they are over the
// process's bound or all's and were not kept.
func (u *unnamedSamples) add(ip, n uint64, first, last int64, all *sharedBudget) bool {
	if len(u.chunks) == 0 {
		u.begin(first)
	}
	c := &u.chunks[len(u.chunks)-1]
	if first < c.baseNs || (first-c.baseNs)/1000 > math.MaxUint32 {
		u.begin(first)
		c = &u.chunks[len(u.chunks)-1]
	}
	firstUs := uint32((first - c.baseNs) / 1000)
	spanMs := uint16(min((max(last-first, 0)+999_999)/1e6, math.MaxUint16))
	for n > 0 {
		if u.entries >= maxUnnamedEntries || !all.room(1) {
			u.dropped += n
			return false
		}
		k := min(n, math.MaxUint16)
		c.entries = append(c.entries, unnamedEntry{ip: ip, firstUs: firstUs, spanMs: spanMs, count: uint16(k)})
		_, elast := c.entries[len(c.entries)-1].times(c.baseNs)
		c.lastNs = max(c.lastNs, elast)
		u.entries++
		all.take(1)
		u.samples += k
		n -= k
	}
	return true
}

// seal ends the chunks begun since the last seal (a drain's, usually one): their entries are
// sorted by address, so that looking them up again walks the map's index in order and finds
// those in a range at once (touchedRanges.hits), and get an array of their own size (a drain
// appends them one by one, and the slack of the array they grew in would stay held).
func (u *unnamedSamples) seal() {
	if n := len(u.chunks); n > 0 && len(u.chunks[n-1].entries) == 0 {
		u.chunks = u.chunks[:n-1]
	}
	for i := len(u.chunks) - 1; i >= 0 && !u.chunks[i].sealed; i-- {
		c := &u.chunks[i]
		slices.SortFunc(c.entries, func(a, b unnamedEntry) int { return cmp.Compare(a.ip, b.ip) })
		if cap(c.entries) > len(c.entries)+len(c.entries)/16 {
			c.entries = exactCopy(c.entries)
		}
		c.sealed = true
	}
}

// exactCopy copies s into an array of exactly its length.
func exactCopy(s []unnamedEntry) []unnamedEntry {
	out := make([]unnamedEntry, len(s))
	copy(out, s)
	return out
}

// resolve offers entries to name, with whether a capture listed them unnamed; name returns
// how many of an entry's samples stay unnamed (and when those were taken), and entries left
// with none are dropped. Offered are the entries whose samples were all taken by upTo, of
// those taken by since (offered before, or looked up when kept) only the ones at addresses
// touched since: the map names nothing else it did not name then. The touched ranges are
// settled.
func (u *unnamedSamples) resolve(upTo, since int64, touched *touchedRanges, name func(ip, n uint64, first, last int64, shown bool) (left uint64, lfirst, llast int64)) {
	kept := u.chunks[:0]
	for _, c := range u.chunks {
		if c.lastNs > since || touched.hits(c.entries) {
			c = u.resolveChunk(c, upTo, since, touched, name)
		}
		if len(c.entries) > 0 {
			kept = append(kept, c)
		}
	}
	clear(u.chunks[len(kept):])
	u.chunks = kept
}

// resolveChunk is resolve's work on one chunk: it returns the chunk with what stays unnamed.
func (u *unnamedSamples) resolveChunk(c unnamedChunk, upTo, since int64, touched *touchedRanges, name func(ip, n uint64, first, last int64, shown bool) (left uint64, lfirst, llast int64)) unnamedChunk {
	entries := c.entries[:0]
	u.entries -= len(c.entries)
	for _, e := range c.entries {
		first, last := e.times(c.baseNs)
		if last > upTo || last <= since && !touched.contains(e.ip) {
			entries = append(entries, e)
			continue
		}
		left, lfirst, llast := name(e.ip, uint64(e.count), first, last, c.shown)
		u.samples -= uint64(e.count) - left
		if left == 0 {
			continue
		}
		e.count = uint16(left)
		if lfirst != first || llast != last {
			e.firstUs = uint32(max(lfirst-c.baseNs, 0) / 1000)
			e.spanMs = uint16(min((max(llast-lfirst, 0)+999_999)/1e6, math.MaxUint16))
		}
		entries = append(entries, e)
	}
	if len(entries) > 0 && cap(entries) > 2*len(entries) {
		entries = exactCopy(entries)
	}
	c.entries = entries
	u.entries += len(entries)
	return c
}

// waitingSince returns a time no sample taken after lookedUpTo was taken before (the base
// of the earliest chunk that holds one: a chunk's entries were all taken at or after its
// base), and whether there are any. It reads the chunks, not their entries: a process
// whose samples all stay unnamed may keep a million.
func (u *unnamedSamples) waitingSince(lookedUpTo int64) (int64, bool) {
	first, ok := int64(math.MaxInt64), false
	for i := range u.chunks {
		if c := &u.chunks[i]; c.lastNs > lookedUpTo && len(c.entries) > 0 {
			first, ok = min(first, c.baseNs), true
		}
	}
	return first, ok
}

// list returns the entries as a capture's unnamed counts of process pid, and notes them
// shown.
func (u *unnamedSamples) list(pid uint32) []profileio.UnnamedCount {
	out := make([]profileio.UnnamedCount, 0, u.entries)
	for i := range u.chunks {
		c := &u.chunks[i]
		c.shown = true
		for _, e := range c.entries {
			first, last := e.times(c.baseNs)
			out = append(out, profileio.UnnamedCount{Pid: pid, IP: e.ip, FirstNs: first, LastNs: last, Count: uint64(e.count)})
		}
	}
	return out
}

// reset forgets every entry (--reset-on-flush), giving them back to all.
func (u *unnamedSamples) reset(all *sharedBudget) {
	all.take(-u.entries)
	*u = unnamedSamples{}
}
