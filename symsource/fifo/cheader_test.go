package fifo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

// TestHeaderIsStrictC99 compiles a use of every profd_jit.h function as strict C99 with only
// POSIX.1-2008 feature macros, with and without _GNU_SOURCE, warnings as errors, and
// included twice from two translation units (no duplicate symbols).
func TestHeaderIsStrictC99(t *testing.T) {
	testenv.Requires(t, testenv.Tool("gcc"))
	dir := t.TempDir()
	use := `#include "profd_jit.h"
#include "profd_jit.h"
int use_%s(void);
int use_%s(void)
{
	profd_jit pj;
	uint64_t idx;
	profd_jit_line line = {0x1000, 1, 0, "f.c"};
	if (profd_jit_open(&pj, "/nonexistent") != PROFD_JIT_NO_DAEMON)
		return 1;
	profd_jit_code_load(&pj, "f", 0x1000, 1, "\xc3", &line, 1, &idx);
	profd_jit_code_move(&pj, 0x1000, 0x2000, 1, idx);
	profd_jit_code_unload(&pj, 0x2000, idx);
	profd_jit_flush(&pj);
	return profd_jit_close(&pj) == PROFD_JIT_NO_DAEMON ? 0 : 1;
}
`
	main := `int use_a(void);
int use_b(void);
int main(void) { return use_a() | use_b(); }
`
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.c", strings.ReplaceAll(use, "%s", "a"))
	b := write("b.c", strings.ReplaceAll(use, "%s", "b"))
	m := write("main.c", main)
	inc, err := filepath.Abs("../../jit")
	if err != nil {
		t.Fatal(err)
	}
	for _, feature := range []string{"-D_POSIX_C_SOURCE=200809L", "-D_GNU_SOURCE"} {
		out := filepath.Join(dir, "prog")
		cmd := exec.Command("gcc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", feature, "-I", inc, "-o", out, a, b, m)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", feature, err, b)
		}
		if b, err := exec.Command(out).CombinedOutput(); err != nil {
			t.Fatalf("%s build: the calls without a daemon did not all return no-daemon: %v %s", feature, err, b)
		}
	}
}
