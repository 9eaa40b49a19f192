package sampler

import "testing"

func TestParseEvent(t *testing.T) {
	for name, want := range map[string]eventSpec{
		"cycles":        {name: "cycles", kind: kindHardware, config: 0},
		"instructions":  {name: "instructions", kind: kindHardware, config: 1},
		"cache-misses":  {name: "cache-misses", kind: kindHardware, config: 3},
		"branch-misses": {name: "branch-misses", kind: kindHardware, config: 5},
		"cpu-clock":     {name: "cpu-clock", kind: kindSoftware, config: 0},
		"task-clock":    {name: "task-clock", kind: kindSoftware, config: 1},
		"r003c":         {name: "r003c", kind: kindRaw, config: 0x3c},
		"r1A2b":         {name: "r1A2b", kind: kindRaw, config: 0x1a2b},
	} {
		got, err := parseEvent(name)
		if err != nil || got != want {
			t.Errorf("parseEvent(%q) = %+v, %v; want %+v", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "r", "rg", "cycles:u", "CPU-CLOCK", "r10000000000000000"} {
		if _, err := parseEvent(bad); err == nil {
			t.Errorf("parseEvent(%q): no error", bad)
		}
	}
}

func TestSkidEncoding(t *testing.T) {
	// go-perf takes precise_ip bit 0 from 0x01 and bit 1 from 0x10.
	for level, want := range []int{0, 0x01, 0x10, 0x11} {
		if got := int(skid(level)); got != want {
			t.Errorf("skid(%d) = %#x, want %#x", level, got, want)
		}
	}
}
