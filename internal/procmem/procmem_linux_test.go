package procmem

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestReadOwnMemory(t *testing.T) {
	want := []byte("\x55\x48\x89\xe5 some code bytes \xc3")
	got, err := Read(uint32(os.Getpid()), uint64(uintptr(unsafe.Pointer(&want[0]))), len(want))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %x, want %x", got, want)
	}
}

func TestReadUnmappedFails(t *testing.T) {
	_, err := Read(uint32(os.Getpid()), 8, 16)
	if err == nil {
		t.Fatal("reading address 8 succeeded")
	}
	var se *os.SyscallError
	if !errors.As(err, &se) && !errors.Is(err, ErrPartial) {
		t.Fatalf("error %v is neither a syscall error nor ErrPartial", err)
	}
}

// TestReadEach reads many ranges of this process, more than one call takes, among them
// unmapped ones (at the start of a call, within it, at its last and first places), one
// that runs into a page that cannot be read, and an empty one: each readable range gets its
// bytes, each other one an error, and an unreadable range does not stop the reading of
// those after it.
func TestReadEach(t *testing.T) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	if err := unix.Mprotect(mem[page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	const n = 2*maxIovecs + 500
	bad := map[int]string{0: "unmapped", 5: "unmapped", maxIovecs - 1: "unmapped", maxIovecs: "unmapped",
		maxIovecs + 1: "partial", 2 * maxIovecs: "unmapped", n - 1: "partial", 300: "empty"}
	rs := make([]Range, n)
	for i := range rs {
		off := (i * 13) % (page - 64)
		rs[i] = Range{Addr: uint64(uintptr(unsafe.Pointer(&mem[off]))), Buf: make([]byte, 16+i%48)}
		switch bad[i] {
		case "unmapped":
			rs[i].Addr = 8
		case "partial":
			rs[i].Addr = uint64(uintptr(unsafe.Pointer(&mem[page-8])))
		case "empty":
			rs[i].Buf = nil
		}
	}
	ReadEach(uint32(os.Getpid()), rs)
	for i, r := range rs {
		switch bad[i] {
		case "unmapped":
			if r.Err == nil {
				t.Errorf("range %d at an unmapped address: no error", i)
			}
		case "partial":
			if !errors.Is(r.Err, ErrPartial) {
				t.Errorf("range %d running into an unreadable page: %v, want ErrPartial", i, r.Err)
			}
		case "empty":
			if r.Err != nil {
				t.Errorf("empty range %d: %v", i, r.Err)
			}
		default:
			off := (i * 13) % (page - 64)
			if r.Err != nil || !bytes.Equal(r.Buf, mem[off:off+len(r.Buf)]) {
				t.Fatalf("range %d: %v, read %x, want %x", i, r.Err, r.Buf, mem[off:off+len(r.Buf)])
			}
		}
	}
}

// BenchmarkReadEach reads 1000 ranges of 128 bytes of this process, with ReadEach and one
// Read each.
func BenchmarkReadEach(b *testing.B) {
	code := make([]byte, 1<<20)
	ranges := func() []Range {
		rs := make([]Range, 1000)
		for i := range rs {
			rs[i] = Range{Addr: uint64(uintptr(unsafe.Pointer(&code[i*1000]))), Buf: make([]byte, 128)}
		}
		return rs
	}
	pid := uint32(os.Getpid())
	b.Run("ReadEach", func(b *testing.B) {
		for range b.N {
			ReadEach(pid, ranges())
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/range")
	})
	b.Run("Read", func(b *testing.B) {
		for range b.N {
			for _, r := range ranges() {
				if _, err := Read(pid, r.Addr, len(r.Buf)); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/range")
	})
}
