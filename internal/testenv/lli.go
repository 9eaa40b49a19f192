package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MatmulMCJIT compiles the repository's workloads/matmul.c (root is the path to the
// repository's root from the test's directory) to IR as scripts/pgo-demo.sh does, and starts
// lli-14 -jit-kind=mcjit on it, long enough to be read while it runs: its jitdump goes
// under the directory it returns (JITDUMPDIR), and it registers its objects with the GDB
// JIT interface. The test's cleanup kills it.
func MatmulMCJIT(t testing.TB, root string) (*exec.Cmd, string) {
	t.Helper()
	Requires(t, Tool("lli-14"), Tool("clang-14"))
	dir := t.TempDir()
	ll := filepath.Join(dir, "matmul.ll")
	out, err := exec.Command("clang-14", "-O2", "-g", "-fdebug-info-for-profiling", "-S", "-emit-llvm",
		filepath.Join(root, "workloads", "matmul.c"), "-o", ll).CombinedOutput()
	if err != nil {
		t.Fatalf("clang-14: %v\n%s", err, out)
	}
	cmd := exec.Command("lli-14", "-jit-kind=mcjit", "-mcpu=x86-64", ll, "400", "1000")
	cmd.Env = append(os.Environ(), "JITDUMPDIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, dir
}
