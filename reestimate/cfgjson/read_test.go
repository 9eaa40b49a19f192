package cfgjson

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/profd/profd/reestimate/cfg"
)

// graph is fn's CFG and where its samples fell: recovered from its code, or as given.
func graph(fn *Function) (*cfg.Graph, *cfg.Attribution, error) {
	if fn.Given != nil {
		return fn.Given.CFG, fn.Given.Attribution(), nil
	}
	g, err := cfg.Build(fn.Code, fn.Addr)
	if err != nil {
		return nil, nil, err
	}
	at, err := cfg.AttributeSamples(g, fn.Samples)
	if err != nil {
		return nil, nil, err
	}
	return g, at, nil
}

// docExample is the first JSON block of docs/reestimate-json.md: the documented input must read.
func docExample(t testing.TB) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/reestimate-json.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no JSON block in docs/reestimate-json.md")
	}
	return block
}

func TestReadJSONDocExample(t *testing.T) {
	funcs, err := Read(strings.NewReader(docExample(t)))
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) != 2 {
		t.Fatalf("%d functions, want 2", len(funcs))
	}
	score, diamond := funcs[0], funcs[1]
	if score.Name != "score" || score.Addr != 0x401240 || len(score.Code) != 75 || score.Samples[0x401255] != 360 || len(score.Samples) != 2 {
		t.Errorf("score = %q %#x, %d code bytes, samples %v", score.Name, score.Addr, len(score.Code), score.Samples)
	}
	g, at, err := graph(&score)
	if err != nil {
		t.Fatal(err)
	}
	if at.Total != 760 || len(g.Blocks) < 5 {
		t.Errorf("score: %d samples in %d blocks", at.Total, len(g.Blocks))
	}
	g, at, err = graph(&diamond)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Blocks) != 4 || len(g.Edges) != 4 || !g.Blocks[3].Exit || g.Blocks[1].Start != 0x1003 || len(g.Blocks[2].Insts) != 4 {
		t.Errorf("diamond: %+v", g)
	}
	if w := at.Weights(g); w[0] != 10 || w[1] != 7 || w[2] != 1 || w[3] != 10 {
		t.Errorf("diamond weights %v, want [10 7 1 10]", w)
	}
	if g.Edges[3] != (cfg.Edge{From: 2, To: 3, Kind: cfg.FallThrough}) {
		t.Errorf("diamond edge 3 = %v", g.Edges[3])
	}
	if err := g.Validate(); err != nil {
		t.Error(err)
	}
}

func TestReadJSONErrors(t *testing.T) {
	code := `{"version":1,"functions":[{"name":"f","addr":"0x10","code":"31c0c3","samples":%s}]}`
	given := `{"version":1,"functions":[{"name":"g","cfg":%s}]}`
	tests := []struct {
		name, in string
		field    string // the field the error must name
		offset   int64  // the byte offset it must report; -1: do not check
	}{
		{"empty", ``, "", 0},
		{"truncated", `{"version":1,"functions":[{"name":"f"`, "", -1},
		{"syntax error offset", `{"version":1, "functions":[}`, "functions", 27},
		{"trailing data", `{"version":1} {}`, "", -1},
		{"no version", `{"functions":[]}`, "version", -1},
		{"future version", `{"version":2}`, "version", -1},
		{"unknown top field", `{"version":1,"extra":0}`, "", -1},
		{"unknown function field", `{"version":1,"functions":[{"name":"f","colour":1}]}`, "", -1},
		{"no name", `{"version":1,"functions":[{"addr":"0x1","code":"c3"}]}`, "name", 26},
		{"no addr", `{"version":1,"functions":[{"name":"f","code":"c3"}]}`, "addr", 26},
		{"decimal addr", `{"version":1,"functions":[{"name":"f","addr":"4096","code":"c3"}]}`, "addr", 26},
		{"odd hex", `{"version":1,"functions":[{"name":"f","addr":"0x1","code":"c3c"}]}`, "code", 26},
		{"no code", `{"version":1,"functions":[{"name":"f","addr":"0x1"}]}`, "code", 26},
		{"wrapping code", `{"version":1,"functions":[{"name":"f","addr":"0xffffffffffffffff","code":"c3c3"}]}`, "code", 26},
		{"negative count", strings.Replace(code, "%s", `{"0x10":-1}`, 1), "", -1},
		{"fractional count", strings.Replace(code, "%s", `{"0x10":1.5}`, 1), "", -1},
		{"absurd count", strings.Replace(code, "%s", `{"0x10":1e30}`, 1), "", -1},
		{"count over the cap", strings.Replace(code, "%s", `{"0x10":281474976710657}`, 1), "", -1},
		{"duplicate address", strings.Replace(code, "%s", `{"0x10":1,"0x010":2}`, 1), "", -1},
		{"bad sample address", strings.Replace(code, "%s", `{"16":1}`, 1), "", -1},
		{"code and cfg", `{"version":1,"functions":[{"name":"f","addr":"0x1","code":"c3","cfg":{"blocks":[{"insts":1}]}}]}`, "cfg", 26},
		{"no blocks", strings.Replace(given, "%s", `{"blocks":[]}`, 1), "cfg", -1},
		{"zero insts", strings.Replace(given, "%s", `{"blocks":[{"insts":0}]}`, 1), "cfg", -1},
		{"huge insts", strings.Replace(given, "%s", `{"blocks":[{"insts":16777217}]}`, 1), "cfg", -1},
		{"bad entry", strings.Replace(given, "%s", `{"entry":1,"blocks":[{"insts":1}]}`, 1), "cfg", -1},
		{"edge out of range", strings.Replace(given, "%s", `{"blocks":[{"insts":1}],"edges":[{"from":0,"to":1,"kind":"jump"}]}`, 1), "cfg", -1},
		{"bad edge kind", strings.Replace(given, "%s", `{"blocks":[{"insts":1}],"edges":[{"from":0,"to":0,"kind":"sideways"}]}`, 1), "cfg", -1},
		{"negative block samples", strings.Replace(given, "%s", `{"blocks":[{"insts":1,"samples":-4}]}`, 1), "cfg", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			funcs, err := Read(strings.NewReader(tt.in))
			var je *InputError
			if !errors.As(err, &je) || !errors.Is(err, ErrBadInput) {
				t.Fatalf("Read = %v, %v; want an *InputError", funcs, err)
			}
			if je.Field != tt.field {
				t.Errorf("error %q names field %q, want %q", err, je.Field, tt.field)
			}
			if tt.offset >= 0 && je.Offset != tt.offset {
				t.Errorf("error %q at byte %d, want %d", err, je.Offset, tt.offset)
			}
			if !strings.HasPrefix(err.Error(), "reestimate: json: byte ") {
				t.Errorf("message %q lacks the context", err)
			}
		})
	}
}

func TestReadJSONTooLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	in := `{"version":1,"functions":[` + strings.Repeat(" ", MaxInputBytes) + `]}`
	_, err := Read(strings.NewReader(in))
	var je *InputError
	if !errors.As(err, &je) || je.Offset != MaxInputBytes {
		t.Fatalf("Read of %d bytes = %v, want an error at byte %d", len(in), err, MaxInputBytes)
	}
}

// FuzzReadJSON: Read never panics, and whatever it accepts yields CFGs and weights that
// Repair's validation accepts.
func FuzzReadJSON(f *testing.F) {
	f.Add(docExample(f))
	f.Add(`{"version":1,"functions":[{"name":"f","addr":"0x10","code":"31c0c3","samples":{"0x10":3,"0x12":1}}]}`)
	f.Add(`{"version":1,"functions":[{"name":"g","cfg":{"entry":1,"blocks":[{"insts":2,"samples":5},{"insts":1,"exit":true}],"edges":[{"from":1,"to":0,"kind":"jump"},{"from":0,"to":1,"kind":"fallthrough"}]}}]}`)
	f.Add(`{"version":1,"functions":[{"name":"f","addr":"0x10","code":"eb01b801000000c3","samples":null}]}`)
	f.Add(`{"version":1}`)
	f.Fuzz(func(t *testing.T, in string) {
		funcs, err := Read(strings.NewReader(in))
		if err != nil {
			var je *InputError
			if !errors.As(err, &je) {
				t.Fatalf("error %v is not an *InputError", err)
			}
			return
		}
		for i := range funcs {
			g, at, err := graph(&funcs[i])
			if err != nil {
				continue // bad code or samples: reported, fine
			}
			if err := g.Validate(); err != nil {
				t.Fatalf("function %d: accepted CFG fails Validate: %v", i, err)
			}
			if err := g.ValidateWeights(at.Weights(g)); err != nil {
				t.Fatalf("function %d: %v", i, err)
			}
		}
	})
}
