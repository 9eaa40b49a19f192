package profileio

import (
	"bytes"
	"testing"
)

func TestTextReportGolden(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTextReport(&b, expectedCapture(len(testCaptureSteps()))); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt.golden", b.Bytes())

	// A capture whose writer never finished says so.
	b.Reset()
	if err := WriteTextReport(&b, expectedCapture(5)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte("capture incomplete")) {
		t.Errorf("report of an unfinished capture:\n%s", b.Bytes())
	}
}
