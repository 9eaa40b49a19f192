package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/profd/profd/internal/outfile"
	"github.com/profd/profd/reestimate"
	"github.com/profd/profd/reestimate/cfgjson"
)

// countsFile is the JSON reestimate writes (docs/reestimate-json.md, "Output").
type countsFile struct {
	Version   int              `json:"version"`
	Functions []functionCounts `json:"functions"`
}

type functionCounts struct {
	functionHeader
	Blocks []blockCounts `json:"blocks"`
	Edges  []edgeCounts  `json:"edges"`
}

type functionHeader struct {
	Name           string `json:"name"`
	Addr           string `json:"addr"`
	Samples        uint64 `json:"samples"`
	PaddingSamples uint64 `json:"padding_samples,omitempty"`
	IndirectJumps  int    `json:"indirect_jumps"`
	Cost           int64  `json:"cost"`
}

type blockCounts struct {
	Start     string  `json:"start"`
	End       string  `json:"end"`
	Insts     int     `json:"insts"`
	Samples   uint64  `json:"samples"`
	Weight    float64 `json:"weight"`
	Count     float64 `json:"count"`
	Reachable bool    `json:"reachable"`
	Exit      bool    `json:"exit,omitempty"`
}

type edgeCounts struct {
	From  int     `json:"from"`
	To    int     `json:"to"`
	Kind  string  `json:"kind"`
	Count float64 `json:"count"`
}

// newFunctionCounts is fn's repair r as the output spells it.
func newFunctionCounts(fn *cfgjson.Function, r *reestimate.Repaired) functionCounts {
	g, at, res := r.Graph, r.Samples, r.Result
	fc := functionCounts{
		functionHeader: functionHeader{
			Name:           fn.Name,
			Addr:           hexAddr(fn.Addr),
			Samples:        at.Total,
			PaddingSamples: at.PaddingSamples,
			IndirectJumps:  g.IndirectJumps,
			Cost:           res.Cost,
		},
		Blocks: make([]blockCounts, len(g.Blocks)),
		Edges:  make([]edgeCounts, len(g.Edges)),
	}
	for i, b := range g.Blocks {
		fc.Blocks[i] = blockCounts{
			Start: hexAddr(b.Start), End: hexAddr(b.End), Insts: len(b.Insts),
			Samples: at.BlockSamples[i], Weight: r.Weights[i], Count: res.BlockCount(i),
			Reachable: res.Reachable[i], Exit: b.Exit,
		}
	}
	for i, e := range g.Edges {
		fc.Edges[i] = edgeCounts{From: e.From, To: e.To, Kind: e.Kind.String(), Count: res.EdgeCount(i)}
	}
	return fc
}

func writeOutput(path, format string, out *countsFile) error {
	return writeTo(path, func(w io.Writer) error {
		if format == formatText {
			return writeText(w, out)
		}
		return writeJSON(w, out)
	})
}

// writeTo runs write on the file at path ("-" is standard output), reporting any error
// with the path. A file is written whole or not at all (internal/outfile), as the daemon
// writes its outputs: a run that fails leaves the file as it was.
func writeTo(path string, write func(io.Writer) error) error {
	var err error
	if path == "-" {
		err = write(os.Stdout)
	} else {
		err = outfile.Write(path, 0o644, write)
	}
	if err != nil {
		return fmt.Errorf("reestimate: writing %s: %w", path, err)
	}
	return nil
}

// writeText writes out as a table: per function its blocks, then its edges.
func writeText(w io.Writer, out *countsFile) error {
	bw := bufio.NewWriter(w)
	for _, fn := range out.Functions {
		padding := ""
		if fn.PaddingSamples > 0 {
			padding = fmt.Sprintf(" (%d in padding)", fn.PaddingSamples)
		}
		fmt.Fprintf(bw, "%s at %s: %d samples%s, %d blocks, %d edges, %d indirect jumps, cost %d\n",
			fn.Name, fn.Addr, fn.Samples, padding, len(fn.Blocks), len(fn.Edges), fn.IndirectJumps, fn.Cost)
		fmt.Fprintf(bw, "  %5s  %-21s %5s %8s %10s %10s\n", "block", "range", "insts", "samples", "weight", "count")
		for i, b := range fn.Blocks {
			note := ""
			if !b.Reachable {
				note = "  unreachable"
			} else if b.Exit {
				note = "  exit"
			}
			fmt.Fprintf(bw, "  %5d  %-21s %5d %8d %10.2f %10.2f%s\n", i, b.Start+"-"+b.End, b.Insts, b.Samples, b.Weight, b.Count, note)
		}
		fmt.Fprintf(bw, "  %5s  %-21s %10s\n", "edge", "kind", "count")
		for _, e := range fn.Edges {
			fmt.Fprintf(bw, "  %5s  %-21s %10.2f\n", fmt.Sprintf("%d>%d", e.From, e.To), e.Kind, e.Count)
		}
	}
	return bw.Flush()
}

func hexAddr(a uint64) string { return "0x" + strconv.FormatUint(a, 16) }

// writeJSON streams out as JSON, one block or edge a line: encoding/json's indenter takes
// seconds on a function of a million blocks.
func writeJSON(w io.Writer, out *countsFile) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	b := make([]byte, 0, 256)
	line := func(s ...any) {
		b = b[:0]
		for _, v := range s {
			switch v := v.(type) {
			case string:
				b = append(b, v...)
			case []byte:
				b = append(b, v...)
			}
		}
		bw.Write(b)
	}
	fmt.Fprintf(bw, "{\n  \"version\": %d,\n  \"functions\": [", out.Version)
	for i, fn := range out.Functions {
		if i > 0 {
			bw.WriteString(",")
		}
		head, err := json.Marshal(fn.functionHeader)
		if err != nil {
			return err
		}
		// head is a whole object: drop its closing brace, the lists follow.
		line("\n    ", head[:len(head)-1], ",\n      \"blocks\": [")
		for k, bc := range fn.Blocks {
			sep := ","
			if k == len(fn.Blocks)-1 {
				sep = ""
			}
			e, err := json.Marshal(bc)
			if err != nil {
				return err
			}
			line("\n        ", e, sep)
		}
		line("\n      ],\n      \"edges\": [")
		for k, ec := range fn.Edges {
			sep := ","
			if k == len(fn.Edges)-1 {
				sep = ""
			}
			e, err := json.Marshal(ec)
			if err != nil {
				return err
			}
			line("\n        ", e, sep)
		}
		bw.WriteString("\n      ]\n    }")
	}
	bw.WriteString("\n  ]\n}\n")
	return bw.Flush()
}
