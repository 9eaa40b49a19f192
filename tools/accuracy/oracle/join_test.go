package oracle

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/profd/profd/codeobj"
	"github.com/profd/profd/tools/accuracy/callgrind"
)

// loopCode is
//
//	0x1000: 31 c0      xor eax, eax
//	0x1002: ff c0      inc eax
//	0x1004: 83 f8 0a   cmp eax, 10
//	0x1007: 75 f9      jne 0x1002
//	0x1009: c3         ret
//	0x100a: 90         nop (padding, never runs)
var loopCode = []byte{0x31, 0xc0, 0xff, 0xc0, 0x83, 0xf8, 0x0a, 0x75, 0xf9, 0xc3, 0x90}

// loopProfile is what callgrind writes for one call of loopCode from lli (object /lli).
const loopProfile = `positions: instr line
events: Ir
ob=(1) /lli
fn=(1) runMain
0x500 0 1
cob=(2) ???
cfn=(2) 0x1000
calls=1 0x1000 0
* 0 32
ob=(2)
fn=(2)
0x1000 0 1
+2 0 10
+2 0 10
+3 0 10
jcnd=9/10 -5 0
* 0
+2 0 1
`

func joinLoop(t *testing.T, text string) *Result {
	t.Helper()
	p, err := callgrind.Parse(strings.NewReader(text), callgrind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := codeobj.Object{Name: "loop", Addr: 0x1000, Size: uint64(len(loopCode)), Code: loopCode}
	r, err := Join(p, []codeobj.Object{obj}, JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestJoinLoop(t *testing.T) {
	r := joinLoop(t, loopProfile)
	f, ok := r.Function("loop")
	if !ok {
		t.Fatal("no function loop")
	}
	if r.JITInstructions != 32 || f.Instructions != 32 || f.Entries != 1 || r.Unattributed != 0 {
		t.Errorf("totals: jit %d fn %d entries %d unattributed %d", r.JITInstructions, f.Instructions, f.Entries, r.Unattributed)
	}
	wantFall := []Edge{
		{0x1000, 0x1002, 1}, {0x1002, 0x1004, 10}, {0x1004, 0x1007, 10}, {0x1007, 0x1009, 1},
	}
	if !reflect.DeepEqual(f.Fallthroughs, wantFall) {
		t.Errorf("fallthroughs %v, want %v", f.Fallthroughs, wantFall)
	}
	wantJumps := []Jump{{From: 0x1007, To: 0x1002, Count: 9, Conditional: true, Executed: 10}}
	if !reflect.DeepEqual(f.Jumps, wantJumps) {
		t.Errorf("jumps %v, want %v", f.Jumps, wantJumps)
	}
	if len(f.Imbalances) != 0 || f.Unaligned != 0 || f.Undecodable != 0 {
		t.Errorf("imbalances %v unaligned %d undecodable %d", f.Imbalances, f.Unaligned, f.Undecodable)
	}
	// Blocks of the loop: [0x1000], [0x1002..0x1007], [0x1009].
	for _, e := range []struct{ from, to, want uint64 }{
		{0x1000, 0x1002, 1}, {0x1007, 0x1002, 9}, {0x1007, 0x1009, 1}, {0x1000, 0x1009, 0},
	} {
		if got := f.EdgeCount(e.from, e.to); got != e.want {
			t.Errorf("edge %#x->%#x = %d, want %d", e.from, e.to, got, e.want)
		}
	}
	if f.Count(0x1002) != 10 || f.Count(0x100a) != 0 {
		t.Errorf("block counts %d %d", f.Count(0x1002), f.Count(0x100a))
	}
}

func TestJoinFindsImbalanceAndMisalignment(t *testing.T) {
	// The back edge said taken 8 times where the loop body ran 10 times, and a count lands
	// inside the cmp instruction.
	text := strings.Replace(loopProfile, "jcnd=9/10", "jcnd=8/10", 1) + "0x1005 0 4\n"
	f, _ := joinLoop(t, text).Function("loop")
	if len(f.Imbalances) == 0 {
		t.Error("no imbalance reported for an inconsistent profile")
	}
	if f.Unaligned != 4 {
		t.Errorf("unaligned %d, want 4", f.Unaligned)
	}
}

func TestJoinRejects(t *testing.T) {
	p, err := callgrind.Parse(strings.NewReader(loopProfile), callgrind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := codeobj.Object{Name: "a", Addr: 0x1000, Size: 4, Code: loopCode[:4]}
	b := codeobj.Object{Name: "b", Addr: 0x1002, Size: 4, Code: loopCode[:4]}
	if _, err := Join(p, []codeobj.Object{b, a}, JoinOptions{}); !errors.Is(err, ErrOverlap) {
		t.Errorf("overlap: %v", err)
	}
	if _, err := Join(p, []codeobj.Object{{Name: "c", Addr: 0x1000, Size: 4}}, JoinOptions{}); !errors.Is(err, ErrNoCode) {
		t.Errorf("no code: %v", err)
	}
	if _, err := Join(p, nil, JoinOptions{Event: "Dr"}); !errors.Is(err, ErrNoEvent) {
		t.Errorf("no event: %v", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := joinLoop(t, loopProfile)
	r.Workload = "loop"
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"addr": "0x1000"`, `"code": "31c0ffc083f80a75f9c390"`, `"0x1002": 10`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("json lacks %s:\n%s", want, buf.String())
		}
	}
	back, err := ReadJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip changed the result:\n%+v\n%+v", back, r)
	}
	if _, err := ReadJSON(strings.NewReader(`{"version":1,"bogus":2}`)); err == nil {
		t.Error("unknown field accepted")
	}
	if _, err := ReadJSON(strings.NewReader(`{"version":2}`)); err == nil {
		t.Error("version 2 accepted")
	}
	buf.Reset()
	if err := r.WriteReestimateJSON(&buf); err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"functions":[{"name":"loop","addr":"0x1000","code":"31c0ffc083f80a75f9c390","samples":{"0x1000":1,"0x1002":10,"0x1004":10,"0x1007":10,"0x1009":1}}]}`
	if got := strings.Join(strings.Fields(buf.String()), ""); got != want {
		t.Errorf("reestimate json\n%s\nwant\n%s", got, want)
	}
}
