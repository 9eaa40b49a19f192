package bpf

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// attach opens a user-only cpu-clock event on every CPU at freqHz and attaches p to them.
func attach(t testing.TB, p *Program, freqHz uint64) []*perf.Event {
	t.Helper()
	var evs []*perf.Event
	for cpu := 0; cpu < runtime.NumCPU(); cpu++ {
		a := &perf.Attr{Type: perf.SoftwareEvent, Config: 0} // PERF_COUNT_SW_CPU_CLOCK
		a.SetSampleFreq(freqHz)
		a.Options.Disabled = true
		a.Options.ExcludeKernel = true
		ev, err := perf.Open(a, perf.AllThreads, cpu, nil)
		if err != nil {
			t.Fatalf("cpu %d: %v", cpu, err)
		}
		t.Cleanup(func() { ev.Close() })
		if err := ev.SetBPF(uint32(p.FD())); err != nil {
			t.Fatalf("attach on cpu %d: %v", cpu, err)
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		if err := ev.Enable(); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// spin keeps n goroutines busy until stop is closed.
func spin(n int, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	var sink atomic.Uint64
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(i)
			for {
				select {
				case <-stop:
					sink.Add(x)
					return
				default:
				}
				for j := 0; j < 10000; j++ { // three multiplies: samples land on several addresses
					x = x*6364136223846793005 + 1442695040888963407
					x = (x ^ x>>29) * 0xbf58476d1ce4e5b9
					x = (x ^ x>>32) * 0x94d049bb133111eb
				}
			}
		}()
	}
	return &wg
}

func load(t testing.TB, cfg Config) *Program {
	t.Helper()
	p, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// drainWhileSpinning calls drain every 5 ms for 600 ms while the spinners run, stops the
// events and the spinners, drains once more and returns how many drains came before that
// last, and the program's stats.
func drainWhileSpinning(t *testing.T, p *Program, evs []*perf.Event, stop chan struct{}, wg *sync.WaitGroup, drain func()) (int, Stats) {
	t.Helper()
	deadline := time.Now().Add(600 * time.Millisecond)
	drains := 0
	for time.Now().Before(deadline) {
		drain()
		drains++
		time.Sleep(5 * time.Millisecond)
	}
	for _, ev := range evs {
		ev.Disable()
	}
	close(stop)
	wg.Wait()
	drain()
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return drains, st
}

// Drains taken while samples keep arriving lose none and count none twice: their sum equals
// the program's own count of samples taken; with each way of reading a map, and with
// one-key primary maps, so that every key but one per shard goes through the overflow maps.
func TestDrainWhileSampling(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	for _, method := range drainMethods {
		t.Run(method.String(), func(t *testing.T) { testDrainWhileSampling(t, method, false) })
		t.Run(method.String()+"/overflow", func(t *testing.T) { testDrainWhileSampling(t, method, true) })
	}
}

func testDrainWhileSampling(t *testing.T, method drainMethod, overflow bool) {
	p := load(t, Config{})
	skipWithoutIterator(t, p, method)
	drainWith(t, p, method)
	if overflow {
		p.adaptive = false
		for s := range p.primaryEntries {
			p.primaryEntries[s] = 1
		}
		// Load made full-size primary maps; a drain before there is any target puts
		// one-key maps in their place.
		if err := p.Drain(func(uint32, uint64, Count) {}); err != nil {
			t.Fatal(err)
		}
	}
	evs := attach(t, p, 4000)
	// Every key's samples were taken after the previous drain began (the first drain's,
	// after the process became a target) and before this one returned, its first no later
	// than its last (CLOCK_MONOTONIC, the clock of jitdump).
	drainedBefore := monotonicNs()
	if err := p.AddTarget(uint32(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wg := spin(2, stop)
	var sum uint64
	var keys int
	// With one-key primary maps, a drain that returns k keys read at least k - shards of
	// them from overflow maps (a key lives in one map of one shard between drains), each
	// counted at least once: a lower bound on the overflow count whatever the spinners'
	// samples hit (how many distinct addresses they spread over depends on the machine).
	var overflowAtLeast uint64
	drain := func() {
		before, start := keys, monotonicNs()
		if err := p.Drain(func(tgid uint32, ip uint64, c Count) {
			if tgid != uint32(os.Getpid()) {
				t.Errorf("count for tgid %d, not a target", tgid)
			}
			if c.N == 0 || c.FirstNs > c.LastNs || c.FirstNs < drainedBefore || c.LastNs > monotonicNs() {
				t.Errorf("count %+v: not %d or more samples between %d and now", c, 1, drainedBefore)
			}
			sum += c.N
			keys++
		}); err != nil {
			t.Fatal(err)
		}
		drainedBefore = start
		overflowAtLeast += uint64(max(0, keys-before-len(p.primaryEntries)))
	}
	drains, st := drainWhileSpinning(t, p, evs, stop, wg, drain)
	t.Logf("%d drains, %d keys (≥ %d counts through overflow maps), %d samples; stats %+v", drains, keys, overflowAtLeast, sum, st)
	if st.Samples < 200 {
		t.Fatalf("only %d samples of two spinning goroutines in 600 ms at 4 kHz", st.Samples)
	}
	if sum != st.Samples {
		t.Errorf("drained %d counts, program took %d samples", sum, st.Samples)
	}
	if st.Kernel != 0 || st.Dropped != 0 {
		t.Errorf("user-only events gave kernel or dropped samples: %+v", st)
	}
	if overflow && (overflowAtLeast == 0 || st.Overflow < overflowAtLeast) {
		t.Errorf("%d of %d samples counted as overflowing one-key primary maps; the drains' keys show at least %d (must be > 0)",
			st.Overflow, st.Samples, overflowAtLeast)
	}
	if !overflow && st.Overflow != 0 {
		t.Errorf("%d samples overflowed %d-key primary maps", st.Overflow, minPrimaryEntries)
	}
	if p.method != method {
		t.Errorf("drains fell back from %s to %s (%v)", method, p.method, p.dumpErr)
	}
}

// A removed target is no longer counted; its samples count as outside.
func TestRemoveTarget(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	p := load(t, Config{})
	attach(t, p, 4000)
	self := uint32(os.Getpid())
	if err := p.AddTarget(self); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveTarget(self); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveTarget(self); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	stop := make(chan struct{})
	wg := spin(1, stop)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	var n uint64
	for range 2 {
		if err := p.Drain(func(_ uint32, _ uint64, c Count) { n += c.N }); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := p.Stats()
	if n != 0 || st.Samples != 0 {
		t.Errorf("removed target counted: %d drained, stats %+v", n, st)
	}
	if st.Outside < 100 {
		t.Errorf("only %d samples outside targets while spinning 200 ms at 4 kHz", st.Outside)
	}
}

// Samples of new keys that find the map full are counted as dropped. The map holds one key:
// the spinning loop alone runs several instructions, so thousands of samples over them
// cannot all share one address.
func TestMapFullDrops(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	p := load(t, Config{MaxEntries: 1})
	evs := attach(t, p, 4000)
	if err := p.AddTarget(uint32(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wg := spin(2, stop)
	time.Sleep(300 * time.Millisecond)
	for _, ev := range evs {
		ev.Disable()
	}
	close(stop)
	wg.Wait()
	keys := 0
	var n uint64
	if err := p.Drain(func(_ uint32, _ uint64, c Count) { keys++; n += c.N }); err != nil {
		t.Fatal(err)
	}
	st, _ := p.Stats()
	if keys > 1 || st.Dropped == 0 || n != st.Samples {
		t.Errorf("%d keys, %d counts; stats %+v: want <= 1 key, drops, counts == samples", keys, n, st)
	}
}

func TestClosedDrain(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	p, err := Load(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := p.Drain(func(uint32, uint64, Count) {}); err == nil {
		t.Errorf("Drain after Close: no error")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func monotonicNs() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// Stack drains taken while samples keep arriving lose none and count none twice: each
// drain reads and empties the map it replaced, which the next drain installs again.
func TestDrainStacksWhileSampling(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF)
	p := load(t, Config{Stacks: true})
	evs := attach(t, p, 4000)
	if err := p.AddTarget(uint32(os.Getpid())); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	wg := spin(2, stop)
	var sum uint64
	maps := map[*ebpf.Map]bool{}
	drain := func() {
		if err := p.DrainStacks(func(s Stack, c Count) {
			if s.Tgid != uint32(os.Getpid()) {
				t.Errorf("stack of tgid %d, not a target", s.Tgid)
			}
			sum += c.N
		}); err != nil {
			t.Fatal(err)
		}
		maps[p.stackMap] = true
	}
	drains, st := drainWhileSpinning(t, p, evs, stop, wg, drain)
	t.Logf("%d drains over %d maps, %d samples; stats %+v", drains, len(maps), sum, st)
	if st.Samples < 200 {
		t.Fatalf("only %d samples of two spinning goroutines in 600 ms at 4 kHz", st.Samples)
	}
	if sum != st.Samples {
		t.Errorf("drained %d stack counts, program took %d samples", sum, st.Samples)
	}
	if len(maps) != 2 {
		t.Errorf("%d drains installed %d stack maps, not the same two in turn", drains+1, len(maps))
	}
}
