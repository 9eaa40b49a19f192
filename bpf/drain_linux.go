package bpf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

const (
	// drainBatchEntries is how many entries one BPF_MAP_LOOKUP_BATCH call reads.
	drainBatchEntries = 4096
	// reuseMaxEntries: a drained map with at most this many keys is emptied (batch delete)
	// and kept as the next spare; a fuller one is closed and the next Drain creates a new
	// map. Deleting costs per key, creating per slot of MaxEntries; with the default
	// MaxEntries split in two shards, this is about where they cross.
	reuseMaxEntries = 2048
	// countRecordBytes is the size of profile.c's struct count_record.
	countRecordBytes = 40
	// iteratorReadBytes is the read size; the kernel fills at most 8 pages per read.
	iteratorReadBytes = 64 << 10
)

// iteratorMinKeys is how many keys a shard's last drain must have found for the next to read
// it with the map-element iterator, whose link and file per read only a large map repays;
// smaller maps are read with batch lookups (docs/benchmarks.md). Tests lower it to read every
// map with the iterator.
var iteratorMinKeys = 8192

// errIteratorRefused: the kernel would not attach or open the iterator; nothing was read.
var errIteratorRefused = errors.New("map iterator refused")

// Drain hands every count taken since the previous Drain to fn, once. It installs empty
// counts maps, which returns once no program run can still be writing to the old ones,
// then reads the old ones, one goroutine per shard (fn is called from one goroutine at a
// time); samples that arrive meanwhile go to the new maps and are handed out by the next
// Drain. fn must not call back into p.
//
// A shard's old overflow map is read only when the program's overflow counter moved
// between the install before last (before which no program run could see that map) and
// this install (after which none can still write to it): otherwise it is empty and is
// kept, untouched, for the next Drain. Each shard's next primary map is sized to twice the
// keys this drain found in the shard (grown at once, shrunk only by a factor of four or
// more), so the buckets a drain reads follow the keys rather than the capacity.
func (p *Program) Drain(fn func(tgid uint32, ip uint64, c Count)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("bpf: drain: %w", os.ErrClosed)
	}
	next, nextOverflow, err := p.newMaps()
	if err != nil {
		return fmt.Errorf("bpf: drain: %w", err)
	}
	before, errBefore := p.stat(statOverflow)
	// Replacing an inner map returns only after an RCU grace period (the kernel's
	// maybe_wait_bpf_programs, Linux 5.0 and later): no program run still holds an old one.
	if err := p.install(next, nextOverflow); err != nil {
		closeMaps(next)
		closeMaps(nextOverflow)
		return fmt.Errorf("bpf: drain: %w", err)
	}
	after, errAfter := p.stat(statOverflow)
	// Without both readings, read the overflow maps anyway.
	overflowed := errAfter != nil || after != p.overflowsBefore
	p.overflowsBefore = before
	if errBefore != nil {
		p.overflowsBefore = ^uint64(0) // differs from any reading: the next drain reads them
	}
	old, oldOverflow := p.current, p.currentOverflow
	p.current, p.currentOverflow = next, nextOverflow

	shards := len(old)
	var fnMu sync.Mutex
	var wg sync.WaitGroup
	for s := range shards {
		readOverflow := overflowed && oldOverflow[s] != old[s]
		for i, m := range []*ebpf.Map{old[s], oldOverflow[s]} {
			r := &p.readers[i*shards+s]
			r.m, r.fn, r.fnMu, r.method, r.dump = m, fn, &fnMu, p.method, p.dump
			r.skip = i == 1 && !readOverflow
		}
		if s == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.readers[s].read()
			p.readers[shards+s].read()
		}()
	}
	p.readers[0].read()
	p.readers[shards].read()
	wg.Wait()

	var errs []error
	for s := range shards {
		r, ro := &p.readers[s], &p.readers[shards+s]
		for _, r := range []*shardReader{r, ro} {
			if r.method > p.method {
				p.method, p.dumpErr = r.method, cmp.Or(r.dumpErr, p.dumpErr)
			}
			if r.err != nil {
				errs = append(errs, r.err)
			}
		}
		p.resize(s, r.emitted+ro.emitted)
		p.spare[s] = p.retire(r, p.primaryEntries[s])
		switch {
		case oldOverflow[s] == old[s]:
		case ro.skip:
			p.spareOverflow[s] = oldOverflow[s] // never written: empty
		default:
			p.spareOverflow[s] = p.retire(ro, p.shardEntries-p.primaryEntries[s])
		}
		for _, r := range []*shardReader{r, ro} {
			r.m, r.fn, r.fnMu = nil, nil, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bpf: drain: read counts: %w", err)
	}
	return nil
}

// resize sets the size of shard s's next primary map from the keys its drain found.
func (p *Program) resize(s, keys int) {
	if !p.adaptive {
		return
	}
	want := uint32(minPrimaryEntries)
	for int(want) < 2*keys && want < p.shardEntries {
		want *= 2
	}
	want = min(want, p.shardEntries)
	if cur := p.primaryEntries[s]; want > cur || want*4 <= cur {
		p.primaryEntries[s] = want
	}
}

// retire empties the map r read and returns it, to be the next spare, when it held few keys
// (all in r.keysRead) and has the size entries; else it closes it and returns nil.
func (p *Program) retire(r *shardReader, entries uint32) *ebpf.Map {
	if r.err == nil && r.reusable && r.m.MaxEntries() == entries {
		if len(r.keysRead) == 0 {
			return r.m
		}
		if n, err := r.m.BatchDelete(r.keysRead, nil); err == nil && n == len(r.keysRead) {
			return r.m
		}
	}
	r.m.Close()
	return nil
}

// shardReader reads one drained counts map; each shard has one, reused from drain to
// drain.
type shardReader struct {
	m        *ebpf.Map
	fn       func(tgid uint32, ip uint64, c Count)
	fnMu     *sync.Mutex // serialises fn between the shards' goroutines
	dump     *ebpf.Program
	method   drainMethod // in: the method to try first; out: the one that worked
	lastKeys int         // keys the last read handed to fn
	emitted  int

	skip     bool        // in: m is known to be empty; read nothing
	reusable bool        // out: m held at most reuseMaxEntries keys, all in keysRead
	keysRead []sampleKey // out: m's keys, up to reuseMaxEntries
	err      error       // out
	dumpErr  error       // out: why the iterator was refused, if it was

	keys    []sampleKey
	vals    []Count
	records []byte // the iterator's output
}

// read hands m's entries to fn with the map-element iterator where it loaded, else with
// batch lookups, else key by key; a method the kernel refuses before any entry was read
// gives way to the next.
//
// The iterator costs a link and a file per read, which a small map does not repay: it reads
// m only when the shard's last drain found iteratorMinKeys keys or more, and batch lookups
// read the rest (r.method stays drainIterator for the next large drain).
func (r *shardReader) read() {
	r.keysRead, r.reusable, r.err, r.emitted = r.keysRead[:0], true, nil, 0
	if r.skip {
		return
	}
	defer func() { r.lastKeys = r.emitted }()
	if r.keys == nil {
		r.keys = make([]sampleKey, drainBatchEntries)
		r.vals = make([]Count, drainBatchEntries)
	}
	if r.method == drainIterator && r.lastKeys >= iteratorMinKeys {
		r.err = r.readIterator()
		if !errors.Is(r.err, errIteratorRefused) {
			return
		}
		r.dumpErr, r.method = r.err, drainBatch
	}
	if r.method <= drainBatch {
		r.err = r.readBatches()
		if !errors.Is(r.err, ebpf.ErrNotSupported) {
			return
		}
		r.method = drainOneByOne
	}
	r.err = r.readOneByOne()
}

// emit hands r.keys[:n], r.vals[:n] to fn and keeps the keys for reuse while they fit.
func (r *shardReader) emit(n int) {
	r.emitted += n
	r.fnMu.Lock()
	for i := 0; i < n; i++ {
		r.fn(r.keys[i].Tgid, r.keys[i].IP, r.vals[i])
	}
	r.fnMu.Unlock()
	if r.reusable && len(r.keysRead)+n <= reuseMaxEntries {
		r.keysRead = append(r.keysRead, r.keys[:n]...)
	} else {
		r.reusable = false
	}
}

// readIterator runs profd_dump (Linux 5.9, kernel BTF) over r.m: one record per key,
// more than a thousand per read.
func (r *shardReader) readIterator() error {
	it, err := link.AttachIter(link.IterOptions{Program: r.dump, Map: r.m})
	if err != nil {
		return fmt.Errorf("%w: %w", errIteratorRefused, err)
	}
	defer it.Close()
	f, err := it.Open()
	if err != nil {
		return fmt.Errorf("%w: %w", errIteratorRefused, err)
	}
	defer f.Close()
	if r.records == nil {
		r.records = make([]byte, iteratorReadBytes)
	}
	buf, have := r.records, 0
	for {
		n, err := f.Read(buf[have:])
		have += n
		recs := min(have/countRecordBytes, len(r.keys))
		for i := 0; i < recs; i++ {
			rec := buf[i*countRecordBytes : (i+1)*countRecordBytes]
			r.keys[i] = sampleKey{Tgid: binary.NativeEndian.Uint32(rec[0:]), IP: binary.NativeEndian.Uint64(rec[8:])}
			r.vals[i] = Count{N: binary.NativeEndian.Uint64(rec[16:]), FirstNs: binary.NativeEndian.Uint64(rec[24:]),
				LastNs: binary.NativeEndian.Uint64(rec[32:])}
		}
		r.emit(recs)
		have = copy(buf, buf[recs*countRecordBytes:have]) // a record cut by the read, if any
		switch {
		case have >= countRecordBytes:
			continue // more whole records than r.keys holds
		case errors.Is(err, io.EOF) || (err == nil && n == 0):
			if have != 0 {
				return fmt.Errorf("map iterator: %d bytes after the last whole record", have)
			}
			return nil
		case err != nil:
			return fmt.Errorf("map iterator: %w", err)
		}
	}
}

// readBatches reads r.m with BPF_MAP_LOOKUP_BATCH (Linux 5.6).
func (r *shardReader) readBatches() error {
	var cursor ebpf.MapBatchCursor
	for {
		n, err := r.m.BatchLookup(&cursor, r.keys, r.vals, nil)
		r.emit(n)
		switch {
		case err == nil:
			continue
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return nil
		default:
			return err
		}
	}
}

// readOneByOne is the path for kernels without batch map operations (before 5.6).
func (r *shardReader) readOneByOne() error {
	it := r.m.Iterate()
	n := 0
	for it.Next(&r.keys[n], &r.vals[n]) {
		if n++; n == len(r.keys) {
			r.emit(n)
			n = 0
		}
	}
	r.emit(n)
	return it.Err()
}
