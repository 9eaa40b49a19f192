package procfs

import "testing"

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("0-2,4,6-7")
	if err != nil || len(got) != 6 || got[0] != 0 || got[2] != 2 || got[3] != 4 || got[5] != 7 {
		t.Errorf("parseCPUList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "-1"} {
		if _, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q): no error", bad)
		}
	}
}
