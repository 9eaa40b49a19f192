package sampler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// nobody is the user of the test's other process.
const nobody = 65534

// With AllProcesses, a process that was never added is counted, in user mode, on every
// back end that opens per-CPU events, and with AllUIDs only those of the users given;
// profd's own process is not.
func TestAllProcessesCountsOthers(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	cases := []struct {
		name string
		cfg  Config
	}{
		{"bpf", Config{Backend: BackendBPF}},
		{"bpf stacks", Config{Backend: BackendBPF, Stacks: true}},
		{"ring", Config{Backend: BackendRing, RingMode: RingPerCPU}},
		{"bpf of a user", Config{Backend: BackendBPF, AllUIDs: []uint32{nobody}}},
		{"bpf stacks of a user", Config{Backend: BackendBPF, Stacks: true, AllUIDs: []uint32{nobody}}},
		{"ring of a user", Config{Backend: BackendRing, RingMode: RingPerCPU, AllUIDs: []uint32{nobody}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.AllProcesses, c.cfg.FreqHz = true, 999
			s := newTestSampler(t, c.cfg)
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			// A shell's empty loop runs in user mode; so does this process's own spin.
			loop := func(uid uint32) *exec.Cmd {
				sh := exec.Command("/bin/sh", "-c", "while :; do :; done")
				sh.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
				if err := sh.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
				return sh
			}
			other, root := loop(nobody), loop(0)
			var stop atomic.Bool
			go func() {
				for n := 0; !stop.Load(); n++ {
				}
			}()
			time.Sleep(400 * time.Millisecond)
			stop.Store(true)
			d, err := s.Drain()
			if err != nil {
				t.Fatal(err)
			}
			ofOther, ofRoot := total(pidCounts(d, other.Process.Pid)), total(pidCounts(d, root.Process.Pid))
			self := total(pidCounts(d, os.Getpid()))
			t.Logf("%s: %d and %d samples of processes of users %d and 0 never added, %d of profd's own", c.name, ofOther, ofRoot, nobody, self)
			if ofOther < 50 {
				t.Errorf("%d samples of user %d's process spinning 400 ms at 999 Hz, never added; want 50 or more", ofOther, nobody)
			}
			switch rootCounted := ofRoot >= 50; {
			case c.cfg.AllUIDs == nil && !rootCounted:
				t.Errorf("%d samples of root's process spinning 400 ms, never added; want 50 or more", ofRoot)
			case c.cfg.AllUIDs != nil && ofRoot != 0:
				t.Errorf("%d samples of root's process, with user %d's alone asked for; want none", ofRoot, nobody)
			}
			if self != 0 {
				t.Errorf("%d samples of the sampler's own process; want none", self)
			}
			for _, st := range d.Stacks {
				if st.PID == uint32(os.Getpid()) {
					t.Fatalf("a call chain of the sampler's own process: %+v", st)
				}
			}
		})
	}
}

// With AllProcesses and AllCgroups, a process never added is counted when it runs below a
// cgroup SetCgroups named (here its parent), and one outside is not; once SetCgroups takes
// the cgroup back, neither is.
func TestAllProcessesOfCgroups(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.BPF, testenv.PerfEvent("cpu-clock"))
	for _, cfg := range []Config{
		{Backend: BackendBPF},
		{Backend: BackendBPF, Stacks: true},
		{Backend: BackendRing, RingMode: RingPerCPU},
	} {
		name := string(cfg.Backend)
		if cfg.Stacks {
			name += " stacks"
		}
		t.Run(name, func(t *testing.T) {
			var raw [6]byte
			rand.Read(raw[:])
			parent := "profd-test-" + hex.EncodeToString(raw[:])
			cg := testenv.Cgroup(t, parent+"/inner")
			st, err := os.Stat(filepath.Dir(cg.Name()))
			if err != nil {
				t.Fatal(err)
			}
			parentID := st.Sys().(*syscall.Stat_t).Ino
			cfg.AllProcesses, cfg.AllCgroups, cfg.FreqHz = true, true, 999
			s := newTestSampler(t, cfg)
			if err := s.SetCgroups([]uint64{parentID}); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			loop := func(attr *syscall.SysProcAttr) *exec.Cmd {
				sh := exec.Command("/bin/sh", "-c", "while :; do :; done")
				sh.SysProcAttr = attr
				if err := sh.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
				return sh
			}
			in := loop(&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())})
			out := loop(nil)
			counts := func() (ofIn, ofOut uint64) {
				time.Sleep(400 * time.Millisecond)
				d, err := s.Drain()
				if err != nil {
					t.Fatal(err)
				}
				return total(pidCounts(d, in.Process.Pid)), total(pidCounts(d, out.Process.Pid))
			}
			ofIn, ofOut := counts()
			t.Logf("%s: %d samples of the process below the cgroup, %d of the one outside", name, ofIn, ofOut)
			if ofIn < 50 || ofOut != 0 {
				t.Errorf("%d samples of the process below the cgroup (want 50 or more), %d of the one outside (want none)", ofIn, ofOut)
			}
			if err := s.SetCgroups(nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Drain(); err != nil {
				t.Fatal(err)
			}
			if ofIn, ofOut = counts(); ofIn+ofOut != 0 {
				t.Errorf("with no cgroup named: %d and %d samples of processes never added; want none", ofIn, ofOut)
			}
		})
	}
}
