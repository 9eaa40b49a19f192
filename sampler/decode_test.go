package sampler

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// rec builds one perf record: header then body.
func rec(typ uint32, misc uint16, body []byte) []byte {
	b := make([]byte, recordHeaderBytes, recordHeaderBytes+len(body))
	binary.NativeEndian.PutUint32(b, typ)
	binary.NativeEndian.PutUint16(b[4:], misc)
	binary.NativeEndian.PutUint16(b[6:], uint16(recordHeaderBytes+len(body)))
	return append(b, body...)
}

func sampleRec(pid, tid uint32, ip, timeNs, period uint64, misc uint16) []byte {
	body := make([]byte, sampleBodyBytes)
	ne := binary.NativeEndian
	ne.PutUint64(body, ip)
	ne.PutUint32(body[8:], pid)
	ne.PutUint32(body[12:], tid)
	ne.PutUint64(body[16:], timeNs)
	ne.PutUint64(body[24:], period)
	return rec(recordSample, misc, body)
}

func lostRec(n uint64) []byte {
	body := make([]byte, 16)
	binary.NativeEndian.PutUint64(body[8:], n)
	return rec(recordLost, 0, body)
}

const miscUser = 2

func TestDecodeStream(t *testing.T) {
	var stream []byte
	stream = append(stream, sampleRec(10, 11, 0x1000, 5, 100, miscUser)...)
	stream = append(stream, sampleRec(10, 12, 0x1000, 6, 100, miscUser)...)
	stream = append(stream, sampleRec(10, 10, 0x2000, 7, 100, miscUser)...)
	stream = append(stream, sampleRec(99, 99, 0x1000, 8, 100, miscUser)...)       // not a target
	stream = append(stream, sampleRec(10, 10, 0xffff1000, 9, 100, miscKernel)...) // kernel mode
	stream = append(stream, rec(3, 0, []byte("comm\x00\x00\x00\x00"))...)         // ignored type
	stream = append(stream, lostRec(42)...)

	a := newAggregate()
	a.targets[10] = struct{}{}
	if err := a.decodeStream(stream); err != nil {
		t.Fatal(err)
	}
	d := a.take(true)
	if d.Counts[Key{10, 0x1000}] != (Count{N: 2, FirstNs: 5, LastNs: 6}) || d.Counts[Key{10, 0x2000}] != (Count{N: 1, FirstNs: 7, LastNs: 7}) || len(d.Counts) != 2 {
		t.Errorf("counts %v", d.Counts)
	}
	want := Stats{Samples: 3, Lost: 42, Outside: 1, Kernel: 1}
	if a.stats != want {
		t.Errorf("stats %+v, want %+v", a.stats, want)
	}
	if again := a.take(true); len(again.Counts) != 0 {
		t.Errorf("second take not empty: %+v", again)
	}
}

// With allBut (AllProcesses, the rings unfiltered in the kernel), every other process's
// user-mode samples are counted; its kernel-mode ones and allBut's own are not.
func TestDecodeStreamAllBut(t *testing.T) {
	var stream []byte
	stream = append(stream, sampleRec(99, 99, 0x1000, 5, 100, miscUser)...)       // never added
	stream = append(stream, sampleRec(99, 99, 0xffff1000, 6, 100, miscKernel)...) // its kernel mode
	stream = append(stream, sampleRec(7, 7, 0x3000, 7, 100, miscUser)...)         // profd's own
	stream = append(stream, sampleRec(10, 10, 0xffff1000, 8, 100, miscKernel)...) // a target's kernel mode
	a := newAggregate()
	a.targets[10] = struct{}{}
	a.allBut = 7
	if err := a.decodeStream(stream); err != nil {
		t.Fatal(err)
	}
	d := a.take(true)
	if d.Counts[Key{99, 0x1000}] != (Count{N: 1, FirstNs: 5, LastNs: 5}) || len(d.Counts) != 1 {
		t.Errorf("counts %v; want one of pid 99 at 0x1000", d.Counts)
	}
	if want := (Stats{Samples: 1, Outside: 2, Kernel: 1}); a.stats != want {
		t.Errorf("stats %+v, want %+v", a.stats, want)
	}
}

func TestDecodeStreamBadRecords(t *testing.T) {
	good := sampleRec(1, 1, 1, 1, 1, miscUser)
	for name, tc := range map[string]struct {
		stream []byte
		offset string
	}{
		"short header":      {append(append([]byte{}, good...), 1, 2, 3), "byte 40"},
		"size below header": {append(append([]byte{}, good...), rec(9, 0, nil)[:6]...), "byte 40"},
		"size past end":     {append(append([]byte{}, good...), good[:20]...), "byte 40"},
		"short sample":      {append(append([]byte{}, good...), rec(recordSample, 0, make([]byte, 8))...), "byte 40"},
		"short lost":        {rec(recordLost, 0, make([]byte, 8)), "byte 0"},
	} {
		a := newAggregate()
		a.targets[1] = struct{}{}
		err := a.decodeStream(tc.stream)
		if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.offset) {
			t.Errorf("%s: error %v, want ErrBadRecord at %s", name, err, tc.offset)
		}
		if name != "short lost" && a.stats.Samples != 1 {
			t.Errorf("%s: the good record before the bad one was not kept", name)
		}
	}
}

func FuzzDecodeStream(f *testing.F) {
	f.Add(sampleRec(1, 1, 0x1000, 1, 1, miscUser))
	f.Add(append(sampleRec(1, 2, 0x1000, 1, 1, miscUser), lostRec(3)...))
	f.Add(rec(recordLostSamples, 0, make([]byte, 8)))
	f.Add([]byte{9, 0, 0, 0, 0, 0, 8, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		a := newAggregate()
		a.targets[1] = struct{}{}
		a.decodeStream(stream)
		var sum uint64
		for _, c := range a.counts {
			sum += c.N
			if c.FirstNs > c.LastNs {
				t.Fatalf("count %+v: first after last", c)
			}
		}
		if sum != a.stats.Samples {
			t.Fatalf("counts sum %d, stats.Samples %d", sum, a.stats.Samples)
		}
	})
}
