package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestProfileParts counts a sample once in a part, however many of the
// part's functions its stack holds, and in every part whose function it
// holds.
func TestProfileParts(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	update, patch, gc, other := fn(1, "update"), fn(2, "patch"), fn(3, "gc"), fn(4, "other")
	loc := func(id uint64, f ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range f {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lu, lp, lg, lo := loc(1, update), loc(2, patch), loc(3, gc), loc(4, other)
	// patch inlined into other: one location, two lines, the part's
	// function the second.
	inlined := loc(5, other, patch)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Function:   []*profile.Function{update, patch, gc, other},
		Location:   []*profile.Location{lu, lp, lg, lo, inlined},
		Sample: []*profile.Sample{
			// Two functions of one part: counted once.
			{Location: []*profile.Location{lu, lp}, Value: []int64{1, int64(10 * time.Millisecond)}},
			{Location: []*profile.Location{lo, lu}, Value: []int64{1, int64(20 * time.Millisecond)}},
			{Location: []*profile.Location{lg}, Value: []int64{1, int64(40 * time.Millisecond)}},
			{Location: []*profile.Location{lo}, Value: []int64{1, int64(80 * time.Millisecond)}},
			// Functions of two parts: counted in both.
			{Location: []*profile.Location{lg, lp}, Value: []int64{1, int64(100 * time.Millisecond)}},
			{Location: []*profile.Location{lo, inlined}, Value: []int64{1, int64(200 * time.Millisecond)}},
		},
	}
	path := filepath.Join(t.TempDir(), "cpu")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	parts := []APIPart{{Name: "writes", Funcs: []string{"update", "patch"}}, {Name: "gc", Funcs: []string{"gc"}}, {Name: "none", Funcs: []string{"absent"}}}
	total, by, err := ProfileParts(path, parts)
	if err != nil {
		t.Fatal(err)
	}
	if total != 450*time.Millisecond {
		t.Errorf("total %v, want 450ms", total)
	}
	want := []time.Duration{330 * time.Millisecond, 140 * time.Millisecond, 0}
	for i := range want {
		if by[i] != want[i] {
			t.Errorf("part %s: %v, want %v", parts[i].Name, by[i], want[i])
		}
	}
}
