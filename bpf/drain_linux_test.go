package bpf

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

var drainMethods = []drainMethod{drainIterator, drainBatch, drainOneByOne}

func (m drainMethod) String() string {
	switch m {
	case drainIterator:
		return "iterator"
	case drainBatch:
		return "batch"
	case drainOneByOne:
		return "one-by-one"
	}
	return fmt.Sprintf("drainMethod(%d)", int(m))
}

// fill puts keys into the current counts maps as the program would: each into its shard's
// primary map, and what does not fit there into the shard's overflow map, counted in the
// overflow counter.
func fill(t testing.TB, p *Program, keys []sampleKey, vals []Count) {
	t.Helper()
	byShard := make([][]sampleKey, len(p.current))
	valsByShard := make([][]Count, len(p.current))
	for i, k := range keys {
		s := shardOf(k) % len(p.current)
		byShard[s] = append(byShard[s], k)
		valsByShard[s] = append(valsByShard[s], vals[i])
	}
	overflowed := 0
	for s, m := range p.current {
		if len(byShard[s]) == 0 {
			continue
		}
		n, err := m.BatchUpdate(byShard[s], valsByShard[s], nil)
		if n < len(byShard[s]) && errors.Is(err, unix.E2BIG) && p.currentOverflow[s] != m {
			byShard[s], valsByShard[s] = byShard[s][n:], valsByShard[s][n:]
			overflowed += len(byShard[s])
			n, err = p.currentOverflow[s].BatchUpdate(byShard[s], valsByShard[s], nil)
		}
		if err != nil || n != len(byShard[s]) {
			t.Fatalf("fill shard %d: %d of %d, %v", s, n, len(byShard[s]), err)
		}
	}
	if overflowed > 0 {
		var perCPU []uint64
		if err := p.objs.Stats.Lookup(uint32(statOverflow), &perCPU); err != nil {
			t.Fatal(err)
		}
		perCPU[0] += uint64(overflowed)
		if err := p.objs.Stats.Update(uint32(statOverflow), perCPU, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// Every way of reading gives each key's count exactly once, for sharded and single maps,
// for maps kept as spares (few keys) and maps replaced (many), and leaves nothing behind.
func TestDrainMethodsAgree(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	for _, method := range drainMethods {
		for _, c := range []struct {
			maxEntries uint32
			keys       int
		}{{0, 3000}, {0, 50_000}, {4096, 3000}} {
			t.Run(fmt.Sprintf("%s/max%d/keys%d", method, c.maxEntries, c.keys), func(t *testing.T) {
				p := load(t, Config{MaxEntries: c.maxEntries})
				wantShards := 2
				if c.maxEntries != 0 && c.maxEntries < minShardedEntries {
					wantShards = 1
				}
				if len(p.current) != wantShards {
					t.Fatalf("%d counts maps, want %d", len(p.current), wantShards)
				}
				skipWithoutIterator(t, p, method)
				drainWith(t, p, method)
				for round := 0; round < 3; round++ {
					want := map[sampleKey]Count{}
					var keys []sampleKey
					var vals []Count
					if round < 2 {
						for i := 0; i < c.keys; i++ {
							k := sampleKey{Tgid: uint32(100 + i%5), IP: 0x7f0000001000 + uint64(i)*24 + uint64(round)}
							keys, vals = append(keys, k), append(vals, Count{N: uint64(i*7 + round + 1), FirstNs: uint64(i), LastNs: uint64(i + round)})
							want[k] = vals[i]
						}
						fill(t, p, keys, vals)
					}
					got := map[sampleKey]Count{}
					if err := p.Drain(func(tgid uint32, ip uint64, c Count) {
						k := sampleKey{Tgid: tgid, IP: ip}
						if _, dup := got[k]; dup {
							t.Errorf("round %d: key %+v handed out twice", round, k)
						}
						got[k] = c
					}); err != nil {
						t.Fatal(err)
					}
					if len(got) != len(want) {
						t.Fatalf("round %d: drained %d keys, want %d", round, len(got), len(want))
					}
					for k, n := range want {
						if got[k] != n {
							t.Fatalf("round %d: key %+v: drained %+v, want %+v", round, k, got[k], n)
						}
					}
				}
				if p.method != method {
					t.Errorf("drains fell back from %s to %s (%v)", method, p.method, p.dumpErr)
				}
			})
		}
	}
}

// A kernel that publishes its BTF has everything the fastest drain needs (map-element
// iterators), unless it refuses tracing programs.
func TestIteratorLoads(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skipf("the kernel publishes no BTF (%v): drains read with batch lookups", err)
	}
	p := load(t, Config{})
	if errors.Is(p.dumpErr, os.ErrPermission) {
		// Some machines (a locked-down kernel, a sandbox) refuse tracing programs to root.
		t.Skipf("the kernel refuses the map iterator here: %v", p.dumpErr)
	}
	if p.method != drainIterator || p.dump == nil {
		t.Fatalf("drains with %s: %v", p.method, p.dumpErr)
	}
}

// shardOf agrees with the program: every key it counted sits in the shard shardOf names.
func TestShardOfMatchesProgram(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	p := load(t, Config{})
	evs := attach(t, p, 4000)
	if err := p.AddTarget(uint32(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	// SHA-256 over a buffer runs hundreds of distinct instructions, so the samples fall on
	// many keys (a tight spin loop has three or four).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 4096)
			for {
				select {
				case <-stop:
					return
				default:
				}
				sum := sha256.Sum256(buf)
				buf[sum[0]] ^= sum[1]
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	for _, ev := range evs {
		ev.Disable()
	}
	close(stop)
	wg.Wait()
	perShard := make([]int, len(p.current))
	for s, m := range p.current {
		var k sampleKey
		var v Count
		it := m.Iterate()
		for it.Next(&k, &v) {
			perShard[s]++
			if shardOf(k) != s {
				t.Errorf("key %+v in shard %d, shardOf says %d", k, s, shardOf(k))
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("keys per shard: %v", perShard)
	if perShard[0] < 4 || perShard[1] < 4 {
		t.Fatalf("only %v keys per shard after sampling two goroutines hashing for 300 ms", perShard)
	}
}

// drainWith makes p's drains read maps with method first, and the iterator (when that is
// the method) every map however few keys it holds, until t ends.
func drainWith(t *testing.T, p *Program, method drainMethod) {
	p.method = method
	minKeys := iteratorMinKeys
	iteratorMinKeys = 0
	t.Cleanup(func() { iteratorMinKeys = minKeys })
}

// skipWithoutIterator skips a test of the iterator drain where the kernel refuses it (no
// kernel BTF): Load then drains with batch lookups, which the other subtests cover.
func skipWithoutIterator(t *testing.T, p *Program, method drainMethod) {
	t.Helper()
	if method == drainIterator && p.dump == nil {
		t.Skipf("the kernel refuses the map iterator: %v", p.dumpErr)
	}
}
