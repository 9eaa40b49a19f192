package profileio

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/profd/profd/internal/testenv"
)

func profdata(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("llvm-profdata-14", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llvm-profdata-14 %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}

// stripComments drops '#' lines, which llvm-profdata does not reproduce.
func stripComments(b []byte) []byte {
	return regexp.MustCompile(`(?m)^#.*\n`).ReplaceAll(b, nil)
}

// TestLLVMProfdataAgrees checks both writers against llvm-profdata-14 itself: it reads
// them, prints the same for both, converts each into the other byte for byte, and its
// text output reads back through ReadText to what we wrote.
func TestLLVMProfdataAgrees(t *testing.T) {
	testenv.Requires(t, testenv.Tool("llvm-profdata-14"))
	dir := t.TempDir()
	text := textOf(t, testProfile())
	bin := extBinaryOf(t, testProfile())
	txtPath, binPath := filepath.Join(dir, "p.txt"), filepath.Join(dir, "p.extbin")
	if err := os.WriteFile(txtPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binPath, bin, 0o644); err != nil {
		t.Fatal(err)
	}

	showText := profdata(t, "show", "--sample", txtPath)
	showBin := profdata(t, "show", "--sample", binPath)
	if !bytes.Equal(showText, showBin) {
		t.Errorf("show --sample differs between text and ext-binary:\n%s\n----\n%s", showText, showBin)
	}
	if !bytes.Contains(showText, []byte("Function: main: 5000, 1, 5 sampled lines")) {
		t.Errorf("show --sample does not list main as written:\n%s", showText)
	}

	if got := profdata(t, "merge", "--sample", "--text", binPath, "-o", "-"); !bytes.Equal(got, stripComments(text)) {
		t.Errorf("merge --text of our ext-binary differs from our text:\n%s\nwant:\n%s", got, stripComments(text))
	}
	profdata(t, "merge", "--sample", "--extbinary", txtPath, "-o", filepath.Join(dir, "llvm.extbin"))
	if got, err := os.ReadFile(filepath.Join(dir, "llvm.extbin")); err != nil || !bytes.Equal(got, bin) {
		t.Errorf("merge --extbinary of our text differs from our ext-binary (%v)", err)
	}

	merged := profdata(t, "merge", "--sample", "--text", txtPath, "-o", "-")
	p, err := ReadText(bytes.NewReader(merged))
	if err != nil {
		t.Fatal(err)
	}
	want := testProfile()
	want.Functions["jit_noline"].NoLineTable = false
	if got := textOf(t, p); !bytes.Equal(got, textOf(t, want)) {
		t.Errorf("llvm-profdata's text, read back, differs:\n%s\nwant:\n%s", got, textOf(t, want))
	}
}
