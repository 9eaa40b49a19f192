package gdbjit

import (
	"os"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// BenchmarkWalk walks a list of 60 000 entries laid out in this process's own memory, read
// through the kernel as a target's is (procmem): entries side by side, as a JIT allocating
// one after another leaves them (a read a page), and each on a page of its own (a read an
// entry), each walk timed as the Reader's are. Reports the time per entry and the CPU time
// the walks counted (what WalkTook reports, by which the daemon spaces walks).
func BenchmarkWalk(b *testing.B) {
	const n = 60000
	pid := uint32(os.Getpid())
	for _, c := range []struct {
		name   string
		stride uint64
	}{{"side-by-side", entrySize}, {"an-entry-a-page", entryPageSize}} {
		b.Run(c.name, func(b *testing.B) {
			// The list is laid out for an address known only once its memory is made: make
			// it, then lay it out at that address.
			buf := make([]byte, descriptorSize+n*c.stride+entryPageSize)
			base := uint64(uintptr(unsafe.Pointer(&buf[0])))
			copy(buf, spacedList(base, n, c.stride))
			r := NewReader(Options{})
			st := &procState{}
			var took time.Duration // the CPU time walks counted (WalkTook)
			b.ResetTimer()
			for range b.N {
				st.walkBegin() // as a walk begins: its thread is held to time it
				keys, err := r.walk(st, pid, base)
				st.walkDone()
				took += st.walkTook
				if err != nil || len(keys) != n {
					b.Fatalf("walk: %v, %d entries", err, len(keys))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
			b.ReportMetric(float64(took.Nanoseconds())/float64(b.N*n), "counted-cpu-ns/entry")
			runtime.KeepAlive(buf)
		})
	}
}
