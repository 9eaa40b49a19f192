package gdbjit

import (
	"encoding/binary"
	"errors"
	"testing"
)

// memory is a fake address space for the list walk: b mapped at base.
type memory struct {
	base uint64
	b    []byte
}

var errUnmapped = errors.New("unmapped")

func (m memory) read(_ uint32, addr uint64, size int) ([]byte, error) {
	if addr < m.base || addr-m.base > uint64(len(m.b)) || uint64(len(m.b))-(addr-m.base) < uint64(size) {
		return nil, errUnmapped
	}
	return m.b[addr-m.base : addr-m.base+uint64(size)], nil
}

// listMemory lays out a descriptor at base and n entries after it, linked in order.
func listMemory(base uint64, n int) []byte { return spacedList(base, n, entrySize) }

// FuzzWalk walks a descriptor list in arbitrary memory (the target's memory is untrusted):
// no panic, at most MaxEntries entries, each entry once, and a well-formed list walked whole.
func FuzzWalk(f *testing.F) {
	const base = 0x1000
	f.Add(listMemory(base, 3))
	f.Add(listMemory(base, 0))
	cyc := listMemory(base, 2)
	binary.LittleEndian.PutUint64(cyc[descriptorSize+entrySize:], base+descriptorSize) // back to the first
	f.Add(cyc)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(Options{MaxEntries: 64})
		r.readFrom(memory{base: base, b: b}.read)
		keys, err := r.walk(&procState{}, 1, base)
		if err != nil {
			if keys != nil {
				t.Fatalf("error %v with %d keys", err, len(keys))
			}
			return
		}
		if len(keys) > 64 {
			t.Fatalf("%d entries walked, MaxEntries 64", len(keys))
		}
		seen := map[uint64]bool{}
		for _, k := range keys {
			if seen[k.entry] {
				t.Fatalf("entry %#x walked twice", k.entry)
			}
			seen[k.entry] = true
		}
	})
}

func TestWalk(t *testing.T) {
	const base = 0x1000
	r := NewReader(Options{MaxEntries: 8})
	r.readFrom(memory{base: base, b: listMemory(base, 3)}.read)
	keys, err := r.walk(&procState{}, 1, base)
	if err != nil || len(keys) != 3 || keys[2].addr != 0x9200 || keys[2].size != 0x100 {
		t.Fatalf("walk: %v, %+v", err, keys)
	}
	cyc := listMemory(base, 2)
	binary.LittleEndian.PutUint64(cyc[descriptorSize+entrySize:], base+descriptorSize)
	r.readFrom(memory{base: base, b: cyc}.read)
	if _, err := r.walk(&procState{}, 1, base); !errors.Is(err, ErrBadList) {
		t.Fatalf("a cycle: error %v, want ErrBadList", err)
	}
	r.readFrom(memory{base: base, b: listMemory(base, 9)}.read)
	if _, err := r.walk(&procState{}, 1, base); !errors.Is(err, ErrBadList) {
		t.Fatalf("9 entries, MaxEntries 8: error %v, want ErrBadList", err)
	}
	bad := listMemory(base, 1)
	bad[0] = 2 // version 2
	r.readFrom(memory{base: base, b: bad}.read)
	if _, err := r.walk(&procState{}, 1, base); !errors.Is(err, ErrBadList) {
		t.Fatalf("version 2: error %v, want ErrBadList", err)
	}
}

// spacedList lays out a descriptor at base and n entries after it, stride bytes apart,
// linked in order.
func spacedList(base uint64, n int, stride uint64) []byte {
	le := binary.LittleEndian
	b := make([]byte, descriptorSize+uint64(n)*stride)
	le.PutUint32(b, 1)
	at := func(i int) uint64 { return descriptorSize + uint64(i)*stride }
	if n > 0 {
		le.PutUint64(b[16:], base+at(0))
	}
	for i := 0; i < n; i++ {
		e := b[at(i):]
		if i+1 < n {
			le.PutUint64(e, base+at(i+1))
		}
		le.PutUint64(e[16:], 0x9000+uint64(i)*0x100)
		le.PutUint64(e[24:], 0x100)
	}
	return b
}

// inPages extends b with zeros to whole pages, as memory is mapped.
func inPages(b []byte) []byte {
	return append(b, make([]byte, (entryPageSize-len(b)%entryPageSize)%entryPageSize)...)
}

// TestWalkPages: a list whose entries lie one after another is walked a page at a time
// (3 000 entries in a read a page, and one for each entry across two pages: 48 reads, not
// 3 001), one whose entries each lie on a page of their own
// an entry at a time after its first pages (not two reads an entry), and both walks give
// every entry, in order.
func TestWalkPages(t *testing.T) {
	const base, n = 0x10000, 3000
	for _, c := range []struct {
		name      string
		stride    uint64
		mostReads int
	}{
		{"entries side by side", entrySize, 1 + 2*(n*entrySize/entryPageSize+1)},
		{"an entry a page", entryPageSize, 1 + n + entryPagesTried},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory{base: base, b: inPages(spacedList(base, n, c.stride))}
			reads := 0
			r := NewReader(Options{})
			r.readFrom(func(pid uint32, addr uint64, size int) ([]byte, error) {
				reads++
				return mem.read(pid, addr, size)
			})
			keys, err := r.walk(&procState{}, 1, base)
			if err != nil || len(keys) != n {
				t.Fatalf("walk: %v, %d entries, want %d", err, len(keys), n)
			}
			for i, k := range keys {
				if k.entry != base+descriptorSize+uint64(i)*c.stride || k.addr != 0x9000+uint64(i)*0x100 || k.size != 0x100 {
					t.Fatalf("entry %d: %+v", i, k)
				}
			}
			t.Logf("%d reads for %d entries", reads, n)
			if reads > c.mostReads {
				t.Errorf("%d reads for %d entries, want at most %d", reads, n, c.mostReads)
			}
		})
	}
}
