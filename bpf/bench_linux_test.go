package bpf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/profd/profd/internal/testenv"
)

// BenchmarkDrain100k drains counts maps holding 100k (tgid, ip) keys: install fresh maps
// (the kernel waits for a grace period), read the old ones. Goal: <= 50 ms.
func BenchmarkDrain100k(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.BPF)
	const entries = 100_000
	p := load(b, Config{})
	keys := make([]sampleKey, entries)
	vals := make([]Count, entries)
	for i := range keys {
		keys[i] = sampleKey{Tgid: uint32(1 + i%7), IP: 0x7f0000000000 + uint64(i)*16}
		vals[i] = Count{N: uint64(i + 1), FirstNs: 1, LastNs: 2}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fill(b, p, keys, vals)
		b.StartTimer()
		got := 0
		if err := p.Drain(func(uint32, uint64, Count) { got++ }); err != nil {
			b.Fatal(err)
		}
		if got != entries {
			b.Fatalf("drained %d keys, want %d", got, entries)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/drain")
}

// BenchmarkProgramRun measures the sampling program's time per run (the kernel's
// BPF_STATS_RUN_TIME) on the samples of a shell loop that is no target, with every process
// counted, and with the processes of cgroups counted: the loop runs five levels below the
// hierarchy's root, in the cgroup named (one lookup per level down to it), below a cgroup
// named at the first level, or outside every cgroup named (a lookup at every level). The
// target case counts a target's samples, as every filter does; target-stacks counts them by
// call chain (Config.Stacks), the words at the stack pointer tested for a return address.
func BenchmarkProgramRun(b *testing.B) {
	testenv.Requires(b, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("no BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	top := "profd-bench-" + strconv.Itoa(os.Getpid())
	deep := testenv.Cgroup(b, top+"/a/b/c/d")
	id := func(f *os.File) uint64 {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			b.Fatal(err)
		}
		return st.Ino
	}
	topDir, err := os.Open(filepath.Join(testenv.Cgroup2Mount(b), top))
	if err != nil {
		b.Fatal(err)
	}
	defer topDir.Close()
	for _, c := range []struct {
		name    string
		cfg     Config
		cgroups []uint64
		target  bool
	}{
		{"target", Config{}, nil, true},
		{"target-stacks", Config{Stacks: true}, nil, true},
		{"all", Config{AllBut: 1}, nil, false},
		{"all-cgroup-named-at-level-5", Config{AllBut: 1, AllCgroups: true}, []uint64{id(deep)}, false},
		{"all-cgroup-named-at-level-1", Config{AllBut: 1, AllCgroups: true}, []uint64{id(topDir)}, false},
		{"all-cgroup-outside", Config{AllBut: 1, AllCgroups: true}, []uint64{1 << 62}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := load(b, c.cfg)
			if err := p.SetCgroups(c.cgroups); err != nil {
				b.Fatal(err)
			}
			sh := exec.Command("/bin/sh", "-c", "while :; do :; done")
			sh.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(deep.Fd())}
			if err := sh.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { sh.Process.Kill(); sh.Wait() }()
			if c.target {
				if err := p.AddTarget(uint32(sh.Process.Pid)); err != nil {
					b.Fatal(err)
				}
			}
			for i := 0; i < b.N; i++ {
				evs := attach(b, p, 999)
				time.Sleep(time.Second)
				for _, ev := range evs {
					ev.Disable()
				}
			}
			prog := p.objs.ProfdSample
			if c.cfg.Stacks {
				prog = p.objs.ProfdSampleStacks
			}
			st, err := prog.Stats()
			if err != nil {
				b.Fatal(err)
			}
			if st.RunCount == 0 {
				b.Skip("the kernel reports no run-time statistics of the program")
			}
			b.ReportMetric(float64(st.Runtime.Nanoseconds())/float64(st.RunCount), "ns/run")
			b.ReportMetric(float64(st.RunCount)/float64(b.N), "runs/op")
		})
	}
}
