package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/profd/profd/internal/testenv"
)

// TestCallSitesDriveClang profiles lli-14 running workloads/callsites.c (frame pointers, no
// inlining) under --stacks and compiles the same source with clang-14 -O2 and the text
// profile profd wrote (and the ext-binary one): the hot indirect call through the function table is promoted to its
// dominant target and inlined, and the hot direct call to digest, which clang does not
// inline without a profile, is inlined. The same profile without its call targets does not
// promote the indirect call: the targets, which only the sampled stacks give, do it.
func TestCallSitesDriveClang(t *testing.T) {
	testenv.Requires(t, testenv.Root, testenv.Tool("lli-14"), testenv.Tool("clang-14"))
	dir := t.TempDir()
	src, ir := "../workloads/callsites.c", filepath.Join(dir, "callsites.ll")
	if out, err := exec.Command("clang-14", "-O1", "-g", "-fdebug-info-for-profiling", "-fno-omit-frame-pointer", "-fno-inline",
		"-S", "-emit-llvm", "-o", ir, src).CombinedOutput(); err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	d := newDirs(t)
	lli := startChild(t, []string{"JITDUMPDIR=" + d.jitdump}, "lli-14", "-jit-kind=mcjit", "-mcpu=x86-64", ir, "40000000")
	pid := lli.pid()
	r := startRun(t, Config{Pids: []uint32{uint32(pid)}, Event: "cpu-clock", FifoDir: d.fifo, JitdumpDir: d.jitdump,
		OutDir: d.out, Formats: []Format{FormatLLVMText, FormatLLVMExtBinary, FormatCapture}, Stacks: true})
	lli.wait(t, 60*time.Second)
	r.wait(t, 30*time.Second)
	profile := outputPath(d, "lli", pid, FormatLLVMText)
	text, err := os.ReadFile(profile)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ +\d+(\.\d+)?: \d+ .*op_mix:\d+`).Match(text) {
		t.Fatalf("no call target op_mix in drive's profile:\n%s", text)
	}
	remarks := func(args ...string) string {
		t.Helper()
		// One -Rpass: a later one replaces an earlier.
		cmd := exec.Command("clang-14", append([]string{"-O2", "-g", "-fdebug-info-for-profiling", "-Rpass=inline|pgo-icall-prom",
			"-c", "-o", os.DevNull, src}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("clang-14 %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	promoted := regexp.MustCompile(`'op_mix' inlined into 'drive'|Promote indirect call to op_mix`)
	inlined := regexp.MustCompile(`'digest' inlined into 'drive'`)
	with := remarks("-fprofile-sample-use=" + profile)
	if !regexp.MustCompile(`'op_mix' inlined into 'drive'`).MatchString(with) || !inlined.MatchString(with) {
		t.Errorf("with profd's profile, clang-14 does not promote the indirect call and inline op_mix and digest into drive:\n%s\nprofile:\n%s", with, text)
	}
	// The ext-binary profile says the same.
	ext := outputPath(d, "lli", pid, FormatLLVMExtBinary)
	if out := remarks("-fprofile-sample-use=" + ext); !regexp.MustCompile(`'op_mix' inlined into 'drive'`).MatchString(out) || !inlined.MatchString(out) {
		t.Errorf("with profd's ext-binary profile, clang-14 does not inline op_mix and digest into drive:\n%s", out)
	}
	if without := remarks(); promoted.MatchString(without) || inlined.MatchString(without) {
		t.Errorf("clang-14 inlines op_mix or digest without a profile; the test proves nothing:\n%s", without)
	}
	// The same profile without call targets.
	stripped := regexp.MustCompile(`(?m)^( +\d+(?:\.\d+)?: \d+)(?: [^ \n]+:\d+)+$`).ReplaceAll(text, []byte("$1"))
	if regexp.MustCompile(`(?m)^ +\d+(\.\d+)?: \d+ \S+:\d+`).Match(stripped) {
		t.Fatalf("call targets left in:\n%s", stripped)
	}
	noTargets := filepath.Join(dir, "no-targets.prof.txt")
	if err := os.WriteFile(noTargets, stripped, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := remarks("-fprofile-sample-use=" + noTargets); promoted.MatchString(out) {
		t.Errorf("clang-14 promotes the indirect call without call targets in the profile:\n%s", out)
	}
}
