package sim

import (
	"math/rand/v2"
	"testing"

	"github.com/profd/profd/reestimate"
)

func TestExplore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var funcsRaw, funcsRep, eRaw, eRep []reestimate.FunctionCounts
	for i := 0; i < 200; i++ {
		f := Generate(rng, GenParams{Blocks: 10 + rng.IntN(60)})
		c := f.Execute(rng, 20+rng.IntN(200))
		s := f.Sample(rng, c, SampleParams{Period: 50, Skid: 0.3})
		a, err := Evaluate(f, c, Weights(f.CFG, s), reestimate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		funcsRaw = append(funcsRaw, a.RawBlocks)
		funcsRep = append(funcsRep, a.RepairedBlocks)
		eRaw = append(eRaw, a.RawEdges)
		eRep = append(eRep, a.RepairedEdges)
	}
	t.Logf("block raw %.4f rep %.4f; edge raw %.4f rep %.4f", reestimate.WeightedOverlap(funcsRaw), reestimate.WeightedOverlap(funcsRep), reestimate.WeightedOverlap(eRaw), reestimate.WeightedOverlap(eRep))
}
